{{/*
values.yaml verbatim, for cloud-controller-manager.fillDefaults (_helpers.tpl): the chart's defaults where the
release's values lack a key (helm upgrade --reuse-values from the Go chart's release). Regenerate after changing
values.yaml (examples/tests/deploy_helm_go.rs fails until then):
  (head -n 7 templates/_defaults.tpl; cat values.yaml; echo '{{- end -}}') > t && mv t templates/_defaults.tpl
*/}}
{{- define "cloud-controller-manager.defaults" -}}
# Values keep the keys of the Go chart (kubernetes/cloud-provider-aws charts/aws-cloud-controller-manager), so an
# existing values file works unchanged; values.schema.json rejects unknown keys and wrong types.
# Differences in defaults are listed in docs/migration-from-go.md.

namespace: "kube-system"

# cloudConfig -- the cloud config (docs/cloud-config.md). When set, the chart renders it into the ConfigMap
# <name>-cloud-config, mounts it at /etc/kubernetes/cloud-config and adds
# --cloud-config=/etc/kubernetes/cloud-config/cloud.conf to args (so args must not have --cloud-config), and a
# change rolls the pods. Either the file's text:
#   cloudConfig: |
#     [Global]
#     KubernetesClusterID = prod
# or an object whose keys the schema checks (list values become repeated keys):
#   cloudConfig:
#     global:
#       KubernetesClusterID: prod
#       NodeIPFamilies: [ipv4, ipv6]
#     serviceOverrides:
#       ec2: {Service: EC2, Region: us-east-1, URL: "https://vpce-0123.ec2.us-east-1.vpce.amazonaws.com", SigningRegion: us-east-1}
# Empty: no cloud config (the binary then reads everything from instance metadata and the instance's tags).
cloudConfig: ""

# Arguments of /bin/aws-cloud-controller-manager (docs/flags.md). The chart binds one ClusterRole to one
# ServiceAccount: keep --use-service-account-credentials unset (false) here, or use the kustomize base, which also
# binds the per-controller accounts.
args:
  - --v=2
  - --cloud-provider=aws

# extraArgs -- the Go chart's older key (before `args`): a map rendered as --<key>=<value> after args. Kept so
# that such a values file still renders; move its flags to args.
extraArgs: {}

# image -- required: no image is published yet, so repository has no default and the chart refuses to render
# without one. Build and push the image (scripts/images.sh without Docker, or the `docker buildx build` command
# in the repository's README, section Deploy), then pass it:
#   --set image.repository=<registry>/aws-cloud-controller-manager --set image.tag=v0.1.0
image:
  repository: ""
  tag: v0.1.0
  pullPolicy: IfNotPresent

imagePullSecrets: []

# nameOverride -- the name of the DaemonSet, its pods' k8s-app label and its container (the Go chart's key).
nameOverride: "aws-cloud-controller-manager"

# fullnameOverride -- the same, taking precedence over nameOverride (the AWS Load Balancer Controller chart's key).
# It also prefixes the chart's other objects: <name>-cloud-config, <name>-metrics, <name>-dry-run.
fullnameOverride: ""

# nodeSelector -- the control plane nodes.
nodeSelector:
  node-role.kubernetes.io/control-plane: ""

# tolerations -- run on uninitialized nodes and on control plane nodes (old and new taint key).
tolerations:
- key: node.cloudprovider.kubernetes.io/uninitialized
  value: "true"
  effect: NoSchedule
- key: node-role.kubernetes.io/master
  effect: NoSchedule
- key: node-role.kubernetes.io/control-plane
  effect: NoSchedule

# affinity -- the pods' affinity (the DaemonSet's and the dry run's), e.g. a nodeAffinity beside nodeSelector.
affinity: {}

# updateStrategy -- the DaemonSet's. RollingUpdate replaces one node's pod at a time (maxUnavailable); leave
# maxSurge out: the new pod would bind the node's --secure-port while the old one holds it (hostNetwork).
updateStrategy:
  type: RollingUpdate

# dnsPolicy -- Default: the node's resolver (cluster DNS may not run before nodes are initialized).
dnsPolicy: Default

# hostNetworking -- the node's network namespace (the controller must work before any CNI does).
hostNetworking: true

priorityClassName: system-node-critical

# clusterRoleRules -- what the controllers call, all through the one ServiceAccount (docs/operations.md#rbac).
# Leader election is granted by the namespaced Role of `leaderElection` instead.
clusterRoleRules:
- apiGroups: [""]
  resources: ["events"]
  # patch: a repeated Event is one object whose count and lastTimestamp are patched (as client-go does).
  verbs: ["create", "patch"]
- apiGroups: [""]
  resources: ["nodes"]
  verbs: ["get", "list", "watch", "patch", "update", "delete"]
- apiGroups: [""]
  resources: ["nodes/status"]
  verbs: ["patch"]
- apiGroups: [""]
  resources: ["services"]
  verbs: ["list", "watch"]
- apiGroups: ["discovery.k8s.io"]
  # The EndpointSlices of Services whose NLB targets only the nodes with endpoints (watched from the first one).
  resources: ["endpointslices"]
  verbs: ["list", "watch"]
- apiGroups: [""]
  resources: ["services/status"]
  verbs: ["patch"]
- apiGroups: ["authentication.k8s.io"]
  resources: ["tokenreviews"]
  verbs: ["create"]
- apiGroups: ["authorization.k8s.io"]
  resources: ["subjectaccessreviews"]
  verbs: ["create"]

clusterRoleName: system:cloud-controller-manager

roleBindingName: cloud-controller-manager:apiserver-authentication-reader

serviceAccountName: cloud-controller-manager

roleName: extension-apiserver-authentication-reader

serviceAccount:
  # annotations -- e.g. eks.amazonaws.com/role-arn for IAM roles for service accounts.
  annotations: {}

# resources -- measured footprint: see docs/operations.md#resources.
resources:
  requests:
    cpu: 200m
    memory: 128Mi
  limits:
    memory: 512Mi

# env -- a list of EnvVar (the Go chart's `{}` is accepted as "none").
env: []

securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities:
    drop:
    - ALL

# podSecurityContext -- the pods run as 65532:65532, not root (the Go chart's pods ran as root). A cloud config
# read from a hostPath (extraVolumes) must be readable by them: make the file world-readable (0644), or readable
# by a group you add here as supplementalGroups: [<gid>] with mode 0640, or set cloudConfig instead (a
# ConfigMap the chart mounts). Running as root (runAsNonRoot: false, runAsUser: 0, runAsGroup: 0) also works.
# docs/migration-from-go.md, "Go-era values".
podSecurityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  seccompProfile:
    type: RuntimeDefault

podAnnotations: {}

podLabels: {}

# livenessProbe -- /healthz, served without credentials. null disables it (--set livenessProbe=null). The chart sets httpGet.port from
# --secure-port in args (10258 by default) and httpGet.host from --bind-address when it names one address (a
# loopback address needs hostNetworking); a port given here that is not --secure-port fails the install.
livenessProbe:
  httpGet:
    scheme: HTTPS
    path: /healthz
  initialDelaySeconds: 20
  periodSeconds: 10
  timeoutSeconds: 5
  failureThreshold: 3

extraVolumes: []

extraVolumeMounts: []

# leaderElection -- the Leases the manager takes: --leader-elect-resource-name (default cloud-controller-manager)
# and, with --enable-leader-migration, the migration Lease (default cloud-provider-extraction-migration), both in
# --leader-elect-resource-namespace (default kube-system). A Role there grants get/update on these names only;
# list the names you set in args.
leaderElection:
  namespace: kube-system
  leaseNames:
  - cloud-controller-manager
  - cloud-provider-extraction-migration
  roleName: cloud-controller-manager:leader-election

metrics:
  # service -- a headless Service <name>-metrics selecting the pods on --secure-port (https).
  service:
    enabled: false
    annotations: {}
  # serviceMonitor -- a Prometheus Operator ServiceMonitor for that Service (needs service.enabled and the
  # monitoring.coreos.com CRDs), and the ClusterRole <name>-metrics-reader to bind to Prometheus's account.
  serviceMonitor:
    enabled: false
    interval: 30s
    labels: {}
    insecureSkipVerify: true

# dryRun -- a dry run beside the running controller (docs/migration-from-go.md, step 0). enabled renders the
# Deployment <name>-dry-run (one replica: the controller's pod with --dry-run added, on the node network like
# the DaemonSet, so on its own port) and the ClusterRole <name>-dry-run-reader (`get` on /dry-run).
dryRun:
  enabled: false
  # securePort -- the dry run's --secure-port (and its probes'): not the controller's, which the DaemonSet's pod
  # holds on the same node. 10268 is used by no Kubernetes component.
  securePort: 10268
  # readers -- subjects (RBAC Subject objects) bound to <name>-dry-run-reader, e.g.
  #   - {kind: User, name: jane@example.com, apiGroup: rbac.authorization.k8s.io}
  #   - {kind: ServiceAccount, name: dry-run-reader, namespace: kube-system}
  readers: []
{{- end -}}
