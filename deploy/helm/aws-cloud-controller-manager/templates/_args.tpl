{{/*
The container's arguments as a YAML list: args, then the Go chart's older extraArgs map as --key=value (sorted by
key), then --cloud-config when cloudConfig is set.
*/}}
{{- define "cloud-controller-manager.args" -}}
{{- $args := list -}}
{{- range .Values.args -}}
{{- $args = append $args (toString .) -}}
{{- end -}}
{{- range $key, $value := .Values.extraArgs -}}
{{- $args = append $args (printf "--%s=%v" (trimPrefix "--" $key) $value) -}}
{{- end -}}
{{- if .Values.cloudConfig -}}
{{- $args = append $args (printf "--cloud-config=%s/cloud.conf" (include "cloud-controller-manager.cloudConfigDir" .)) -}}
{{- end -}}
{{- toYaml $args -}}
{{- end -}}

{{/* An argument's flag name as the binary reads it: before any `=`, `_` read as `-`; empty for a non-flag. */}}
{{- define "cloud-controller-manager.flagName" -}}
{{- if hasPrefix "--" . -}}
{{- regexReplaceAll "=.*$" . "" | replace "_" "-" -}}
{{- end -}}
{{- end -}}

{{/*
The value of the flag .name among .args, as the binary reads it: `--name=value` or `--name value`, the last one
winning; empty when absent.
*/}}
{{- define "cloud-controller-manager.flag" -}}
{{- $want := printf "--%s" .name -}}
{{- $value := "" -}}
{{- $next := false -}}
{{- range .args -}}
{{- if $next -}}
{{- $value = . -}}
{{- $next = false -}}
{{- else if eq (include "cloud-controller-manager.flagName" .) $want -}}
{{- if contains "=" . -}}
{{- $value = regexReplaceAll "^[^=]*=" . "" -}}
{{- else -}}
{{- $next = true -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $value -}}
{{- end -}}

{{/* The controller's --secure-port (10258 unless args set it); "0" when serving is disabled. */}}
{{- define "cloud-controller-manager.securePort" -}}
{{- $port := include "cloud-controller-manager.flag" (dict "args" (include "cloud-controller-manager.args" . | fromYamlArray) "name" "secure-port") | default "10258" -}}
{{- if not (regexMatch "^[0-9]+$" $port) -}}
{{- fail (printf "args: --secure-port=%s is not a port number" $port) -}}
{{- end -}}
{{- if gt (atoi $port) 65535 -}}
{{- fail (printf "args: --secure-port=%s is above 65535" $port) -}}
{{- end -}}
{{- atoi $port -}}
{{- end -}}

{{/*
The host a probe must name for --bind-address in args: none when it binds every address (the kubelet probes the
pod's IP), the address itself otherwise. A loopback address is reachable by the kubelet only in the node's
network namespace: with hostNetworking off it fails, saying what to change.
*/}}
{{- define "cloud-controller-manager.probeHost" -}}
{{- $bind := include "cloud-controller-manager.flag" (dict "args" (include "cloud-controller-manager.args" . | fromYamlArray) "name" "bind-address") -}}
{{- if not (has $bind (list "" "0.0.0.0" "::" "[::]")) -}}
{{- if and (or (hasPrefix "127." $bind) (eq $bind "::1") (eq $bind "localhost")) (not .Values.hostNetworking) -}}
{{- fail (printf "args has --bind-address=%s, but hostNetworking is false: the kubelet probes the pod's own address and cannot reach its loopback. Remove --bind-address, or set hostNetworking: true" $bind) -}}
{{- end -}}
{{- $bind -}}
{{- end -}}
{{- end -}}

{{/*
A probe (.probe, from values) aimed at the secure port .port and host .host: an httpGet without a port gets
.port; one naming another port fails, saying so (a probe on a port nothing serves restarts the pods forever).
.what names the value in that message.
*/}}
{{- define "cloud-controller-manager.probe" -}}
{{- $probe := deepCopy .probe -}}
{{- if $probe.httpGet -}}
{{- $get := $probe.httpGet -}}
{{- if and (hasKey $get "port") (ne (toString $get.port) (toString .port)) (ne (toString $get.port) "https") -}}
{{- fail (printf "%s.httpGet.port is %v, but the controller serves on %v (--secure-port): remove %s.httpGet.port, the chart sets it from --secure-port" .what $get.port .port .what) -}}
{{- end -}}
{{- $_ := set $get "port" (atoi (toString .port)) -}}
{{- if and .host (not (hasKey $get "host")) -}}
{{- $_ := set $get "host" .host -}}
{{- end -}}
{{- end -}}
{{- toYaml $probe -}}
{{- end -}}

{{/*
The dry-run Deployment's arguments: the controller's, without --secure-port and --dry-run, then --dry-run and
--secure-port=<dryRun.securePort> (its own port: it shares the node's network with the DaemonSet's pod).
*/}}
{{- define "cloud-controller-manager.dryRunArgs" -}}
{{- $out := list -}}
{{- $skip := false -}}
{{- range (include "cloud-controller-manager.args" . | fromYamlArray) -}}
{{- $name := include "cloud-controller-manager.flagName" . -}}
{{- if $skip -}}
{{- $skip = false -}}
{{- else if eq $name "--secure-port" -}}
{{- $skip = not (contains "=" .) -}}
{{- else if ne $name "--dry-run" -}}
{{- $out = append $out . -}}
{{- end -}}
{{- end -}}
{{- $out = append $out "--dry-run" -}}
{{- $out = append $out (printf "--secure-port=%v" .Values.dryRun.securePort) -}}
{{- toYaml $out -}}
{{- end -}}

{{/*
The hostPath volume the --cloud-config file is read from, when extraVolumes/extraVolumeMounts put it there (the Go
chart's pattern) and the pods run as neither root nor with supplementalGroups: that path, else empty. Such a file
is typically root's alone (0600), which uid 65532 cannot read.
*/}}
{{- define "cloud-controller-manager.unreadableHostPath" -}}
{{- $v := .Values -}}
{{- $file := include "cloud-controller-manager.flag" (dict "args" (include "cloud-controller-manager.args" . | fromYamlArray) "name" "cloud-config") -}}
{{- $pod := $v.podSecurityContext | default dict -}}
{{- $container := $v.securityContext | default dict -}}
{{- $uid := "65532" -}}
{{- if hasKey $pod "runAsUser" }}{{ $uid = toString $pod.runAsUser }}{{ end -}}
{{- if hasKey $container "runAsUser" }}{{ $uid = toString $container.runAsUser }}{{ end -}}
{{- if and $file (ne $uid "0") (not $pod.supplementalGroups) -}}
{{- range $mount := $v.extraVolumeMounts -}}
{{- if or (eq $file $mount.mountPath) (hasPrefix (printf "%s/" (trimSuffix "/" $mount.mountPath)) $file) -}}
{{- range $volume := $v.extraVolumes -}}
{{- if and (eq $volume.name $mount.name) $volume.hostPath -}}
{{- $volume.hostPath.path -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
