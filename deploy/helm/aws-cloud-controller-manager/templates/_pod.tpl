{{/*
The pod template of the DaemonSet and of the dry-run Deployment: .root is the chart's context, .name the pods'
k8s-app label and container name, .args their arguments (a YAML list), .port the secure port they serve on (0:
none, then no port and no probe), .readiness whether to add a readiness probe (/readyz), .critical whether to
give them priorityClassName.
*/}}
{{- define "cloud-controller-manager.pod" -}}
{{- $v := .root.Values -}}
{{- $host := include "cloud-controller-manager.probeHost" .root -}}
metadata:
  labels:
    k8s-app: {{ .name }}
    {{- with $v.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- if or $v.podAnnotations $v.cloudConfig }}
  annotations:
    {{- with $v.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
    {{- if $v.cloudConfig }}
    # A changed cloud config rolls the pods (the binary reads it at start only).
    checksum/cloud-config: {{ include "cloud-controller-manager.cloudConfig" .root | sha256sum }}
    {{- end }}
  {{- end }}
spec:
  nodeSelector:
    {{- toYaml $v.nodeSelector | nindent 4 }}
  tolerations:
    {{- toYaml $v.tolerations | nindent 4 }}
  {{- with $v.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- if .critical }}
  {{- with $v.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  {{- end }}
  serviceAccountName: {{ $v.serviceAccountName }}
  {{- if $v.hostNetworking }}
  hostNetwork: true
  {{- end }}
  {{- with $v.dnsPolicy }}
  dnsPolicy: {{ . }}
  {{- end }}
  {{- with $v.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- toYaml $v.podSecurityContext | nindent 4 }}
  containers:
  - name: {{ .name }}
    image: {{ include "cloud-controller-manager.image" .root | quote }}
    imagePullPolicy: {{ $v.image.pullPolicy | default "IfNotPresent" }}
    args:
      {{- .args | nindent 6 }}
    {{- if ne (toString .port) "0" }}
    ports:
    - name: https
      containerPort: {{ .port }}
      protocol: TCP
    {{- with $v.livenessProbe }}
    livenessProbe:
      {{- include "cloud-controller-manager.probe" (dict "probe" . "port" $.port "host" $host "what" "livenessProbe") | nindent 6 }}
    {{- end }}
    {{- if .readiness }}
    readinessProbe:
      {{- include "cloud-controller-manager.probe" (dict "probe" (dict "httpGet" (dict "scheme" "HTTPS" "path" "/readyz") "periodSeconds" 10 "timeoutSeconds" 5) "port" $.port "host" $host "what" "readinessProbe") | nindent 6 }}
    {{- end }}
    {{- end }}
    resources:
      {{- toYaml $v.resources | nindent 6 }}
    {{- if kindIs "slice" $v.env }}
    {{- with $v.env }}
    env:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    {{- end }}
    securityContext:
      {{- toYaml $v.securityContext | nindent 6 }}
    {{- if or $v.extraVolumeMounts $v.cloudConfig }}
    volumeMounts:
      {{- with $v.extraVolumeMounts }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
      {{- if $v.cloudConfig }}
      - name: cloud-config
        mountPath: {{ include "cloud-controller-manager.cloudConfigDir" .root }}
        readOnly: true
      {{- end }}
    {{- end }}
  {{- if or $v.extraVolumes $v.cloudConfig }}
  volumes:
    {{- with $v.extraVolumes }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
    {{- if $v.cloudConfig }}
    - name: cloud-config
      configMap:
        name: {{ include "cloud-controller-manager.cloudConfigName" .root }}
    {{- end }}
  {{- end }}
{{- end -}}
