// helm-template renders a Helm chart the way `helm template` does, for the tests of deploy/helm (no Helm
// binary can be installed here): the chart's values.yaml deep-merged with each -f file (maps merge, everything
// else is replaced, null deletes a key), Go text/template with the Sprig functions and Helm's own (toYaml,
// fromYaml, fromYamlArray, toJson, include, tpl, required), .Values, .Release, .Chart and .Capabilities, missing keys
// rendered empty. It prints each non-empty template as "---\n# Source: <chart>/templates/<file>\n<text>";
// NOTES.txt is rendered last under the same header. `-defaults FILE` renders with FILE in place of the chart's
// values.yaml, as `helm upgrade --reuse-values` renders with the previous release's chart defaults. It builds offline from Debian's packages
// (golang-github-masterminds-sprig-dev, golang-github-ghodss-yaml-dev) in GOPATH mode.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig"
	"github.com/ghodss/yaml"
)

type files []string

func (f *files) String() string     { return strings.Join(*f, ",") }
func (f *files) Set(v string) error { *f = append(*f, v); return nil }

func readYAML(path string) (map[string]interface{}, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]interface{}{}
	if err := yaml.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// merge overlays src onto dst as Helm coalesces user values onto chart defaults.
func merge(dst, src map[string]interface{}) {
	for k, v := range src {
		if v == nil {
			delete(dst, k)
			continue
		}
		sv, sIsMap := v.(map[string]interface{})
		dv, dIsMap := dst[k].(map[string]interface{})
		if sIsMap && dIsMap {
			merge(dv, sv)
		} else {
			dst[k] = v
		}
	}
}

func toYAML(v interface{}) string {
	data, err := yaml.Marshal(v)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(data), "\n")
}

func fromYAML(s string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

func fromYAMLArray(s string) []interface{} {
	a := []interface{}{}
	if err := yaml.Unmarshal([]byte(s), &a); err != nil {
		a = []interface{}{err.Error()}
	}
	return a
}

func run(chart, defaults string, valueFiles []string, name, namespace string) error {
	if defaults == "" {
		defaults = filepath.Join(chart, "values.yaml")
	}
	values, err := readYAML(defaults)
	if err != nil {
		return err
	}
	for _, f := range valueFiles {
		user, err := readYAML(f)
		if err != nil {
			return err
		}
		merge(values, user)
	}
	meta, err := readYAML(filepath.Join(chart, "Chart.yaml"))
	if err != nil {
		return err
	}
	chartName, _ := meta["name"].(string)
	data := map[string]interface{}{
		"Values":       values,
		"Release":      map[string]interface{}{"Name": name, "Namespace": namespace, "Service": "Helm", "IsInstall": true, "IsUpgrade": false, "Revision": 1},
		"Chart":        map[string]interface{}{"Name": chartName, "Version": meta["version"], "AppVersion": meta["appVersion"]},
		"Capabilities": map[string]interface{}{"KubeVersion": map[string]interface{}{"Version": "v1.20.2", "Major": "1", "Minor": "20"}},
	}
	root := template.New("chart").Option("missingkey=zero")
	funcs := sprig.TxtFuncMap()
	delete(funcs, "env")
	delete(funcs, "expandenv")
	funcs["toYaml"] = toYAML
	funcs["fromYaml"] = fromYAML
	funcs["fromYamlArray"] = fromYAMLArray
	funcs["required"] = func(msg string, v interface{}) (interface{}, error) {
		if v == nil || v == "" {
			return nil, errors.New(msg)
		}
		return v, nil
	}
	funcs["include"] = func(name string, d interface{}) (string, error) {
		var buf bytes.Buffer
		err := root.ExecuteTemplate(&buf, name, d)
		return buf.String(), err
	}
	funcs["tpl"] = func(text string, d interface{}) (string, error) {
		t, err := root.Clone()
		if err != nil {
			return "", err
		}
		t, err = t.New("tpl").Parse(text)
		if err != nil {
			return "", err
		}
		var buf bytes.Buffer
		err = t.Execute(&buf, d)
		return buf.String(), err
	}
	root.Funcs(funcs)
	paths, err := filepath.Glob(filepath.Join(chart, "templates", "*"))
	if err != nil {
		return err
	}
	sort.Strings(paths)
	var rendered []string
	for _, p := range paths {
		text, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		base := filepath.Base(p)
		if _, err := root.New(base).Parse(string(text)); err != nil {
			return fmt.Errorf("parsing %s: %w", p, err)
		}
		if !strings.HasPrefix(base, "_") && base != "NOTES.txt" {
			rendered = append(rendered, base)
		}
	}
	if root.Lookup("NOTES.txt") != nil {
		rendered = append(rendered, "NOTES.txt")
	}
	for _, base := range rendered {
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, base, data); err != nil {
			return fmt.Errorf("rendering %s: %w", base, err)
		}
		out := strings.ReplaceAll(buf.String(), "<no value>", "")
		if strings.TrimSpace(out) == "" {
			continue
		}
		fmt.Printf("---\n# Source: %s/templates/%s\n%s\n", chartName, base, out)
	}
	return nil
}

func main() {
	var valueFiles files
	flag.Var(&valueFiles, "f", "a values file (repeatable)")
	name := flag.String("name", "aws-cloud-controller-manager", "release name")
	namespace := flag.String("namespace", "kube-system", "release namespace")
	defaults := flag.String("defaults", "", "values in place of the chart's values.yaml (as --reuse-values)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: helm-template [-f values.yaml]... CHART_DIR")
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *defaults, valueFiles, *name, *namespace); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}
