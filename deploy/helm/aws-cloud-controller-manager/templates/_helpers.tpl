{{/* The name of the DaemonSet, its k8s-app label and its container. */}}
{{- define "cloud-controller-manager.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
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
{{- range .Values.args -}}
{{- if hasPrefix "--cloud-config" . -}}
{{- fail (printf "cloudConfig is set, so the chart passes --cloud-config itself: remove %q from args" .) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and .Values.metrics.serviceMonitor.enabled (not .Values.metrics.service.enabled) -}}
{{- fail "metrics.serviceMonitor.enabled needs metrics.service.enabled: the ServiceMonitor selects that Service" -}}
{{- end -}}
{{- end -}}
