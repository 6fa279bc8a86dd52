{{/* The name of the DaemonSet, its k8s-app label and its container. */}}
{{- define "cloud-controller-manager.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}
