{{/*
The values with the chart's defaults filled in where a key is absent. `helm upgrade --reuse-values` from a release
of the Go chart renders with that chart's defaults instead of this chart's values.yaml, so every key the Go chart
lacks (livenessProbe, leaderElection, metrics, dryRun, ...) would be missing; _defaults.tpl holds values.yaml
verbatim (a test keeps them equal) and each template calls this first. It acts only when the values lack one
of this chart's own maps (leaderElection, metrics, dryRun), so that a key nulled on purpose in a normal install
(livenessProbe: null) stays deleted. Only absent keys are filled, maps recursively as Helm merges a values file
onto the defaults: a value the release set is kept (false included), a map gets the keys it lacks.
*/}}
{{- define "cloud-controller-manager.fillDefaults" -}}
{{- if not (and (hasKey .Values "leaderElection") (hasKey .Values "metrics") (hasKey .Values "dryRun")) -}}
{{- include "cloud-controller-manager.fill" (dict "dst" .Values "src" (include "cloud-controller-manager.defaults" . | fromYaml)) -}}
{{- end -}}
{{- end -}}

{{- define "cloud-controller-manager.fill" -}}
{{- $dst := .dst -}}
{{- range $key, $value := .src -}}
{{- if or (not (hasKey $dst $key)) (eq (index $dst $key | toString) "<nil>") -}}
{{- $_ := set $dst $key $value -}}
{{- else if and (kindIs "map" $value) (kindIs "map" (index $dst $key)) -}}
{{- include "cloud-controller-manager.fill" (dict "dst" (index $dst $key) "src" $value) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The name of the DaemonSet, its k8s-app label and its container, and the prefix of the chart's other objects:
fullnameOverride, else nameOverride (the Go chart's key), else the chart's name.
*/}}
{{- define "cloud-controller-manager.name" -}}
{{- .Values.fullnameOverride | default .Values.nameOverride | default .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The dry-run Deployment's name, its k8s-app label and its container. */}}
{{- define "cloud-controller-manager.dryRunName" -}}
{{- printf "%s-dry-run" (include "cloud-controller-manager.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The ConfigMap holding the cloud config (when .Values.cloudConfig is set). */}}
{{- define "cloud-controller-manager.cloudConfigName" -}}
{{- printf "%s-cloud-config" (include "cloud-controller-manager.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Where the cloud config is mounted; --cloud-config points at cloud.conf in it. */}}
{{- define "cloud-controller-manager.cloudConfigDir" -}}
/etc/kubernetes/cloud-config
{{- end -}}

{{/*
The cloud config file (docs/cloud-config.md): .Values.cloudConfig as written when it is a string, else rendered
from its `global` and `serviceOverrides` maps (values quoted, list values repeated one per line).
*/}}
{{- define "cloud-controller-manager.cloudConfig" -}}
{{- $c := .Values.cloudConfig -}}
{{- if kindIs "string" $c -}}
{{ $c }}
{{- else -}}
[Global]
{{- range $key, $value := $c.global }}
{{- if kindIs "slice" $value }}
{{- range $value }}
{{ $key }} = {{ toString . | quote }}
{{- end }}
{{- else }}
{{ $key }} = {{ toString $value | quote }}
{{- end }}
{{- end }}
{{- range $name, $override := $c.serviceOverrides }}

[ServiceOverride {{ $name | quote }}]
{{- range $key, $value := $override }}
{{ $key }} = {{ toString $value | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
The container image. image.repository has no default (no image is published yet): without it the chart fails,
saying how to build one.
*/}}
{{- define "cloud-controller-manager.image" -}}
{{- $repository := required "image.repository is required: no aws-cloud-controller-manager image is published yet. Build and push one (scripts/images.sh, or the docker buildx build command in the repository README's Deploy section), then pass it: --set image.repository=<registry>/aws-cloud-controller-manager --set image.tag=v0.1.0" .Values.image.repository -}}
{{- printf "%s:%s" $repository .Values.image.tag -}}
{{- end -}}

{{/* Fails on values that contradict each other (the schema checks each value alone). */}}
{{- define "cloud-controller-manager.validate" -}}
{{- if .Values.cloudConfig -}}
{{- range (concat .Values.args (keys (.Values.extraArgs | default dict))) -}}
{{- if hasPrefix "--cloud-config" (printf "--%s" (trimPrefix "--" .)) -}}
{{- fail (printf "cloudConfig is set, so the chart passes --cloud-config itself: remove %q from args" .) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and .Values.metrics.serviceMonitor.enabled (not .Values.metrics.service.enabled) -}}
{{- fail "metrics.serviceMonitor.enabled needs metrics.service.enabled: the ServiceMonitor selects that Service" -}}
{{- end -}}
{{- if and .Values.metrics.service.enabled (eq (include "cloud-controller-manager.securePort" .) "0") -}}
{{- fail "metrics.service.enabled needs the secure port: args has --secure-port=0, which serves nothing" -}}
{{- end -}}
{{- $host := include "cloud-controller-manager.probeHost" . -}}
{{- if and .Values.metrics.service.enabled (or (hasPrefix "127." $host) (eq $host "::1" "localhost")) -}}
{{- fail (printf "metrics.service.enabled needs the secure port on the node's address, but args has --bind-address=%s (loopback): remove it, or disable the metrics Service" $host) -}}
{{- end -}}
{{- if .Values.dryRun.enabled -}}
{{- if eq (toString .Values.dryRun.securePort) (include "cloud-controller-manager.securePort" .) -}}
{{- fail (printf "dryRun.securePort %v is the controller's own --secure-port: the dry run shares its nodes' network, pick another port" .Values.dryRun.securePort) -}}
{{- end -}}
{{- end -}}
{{- end -}}
