{{/*
Names and labels.
*/}}
{{- define "shipnotify.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "shipnotify.fullname" -}}
{{- if contains .Chart.Name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/* The name of one process's objects: fullname-process. */}}
{{- define "shipnotify.component" -}}
{{- printf "%s-%s" (include "shipnotify.fullname" .root) .component | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "shipnotify.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/part-of: shipnotify
{{ include "shipnotify.selectorLabels" . }}
{{- end }}

{{- define "shipnotify.selectorLabels" -}}
app.kubernetes.io/name: {{ include "shipnotify.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "shipnotify.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "shipnotify.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "shipnotify.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
Time budgets. The worker's stop timeout is worker.StopTimeout (budget.WorkerStop: a
notify attempt, its record and a margin); serve drains requests for its request timeout plus
5 s (cmd/shipnotify's shutdownMargin). deploy.TestHelmChart holds these to the Go constants.
*/}}
{{- define "shipnotify.workerStopTimeoutSeconds" -}}45{{- end }}
{{- define "shipnotify.serveShutdownMarginSeconds" -}}5{{- end }}

{{- define "shipnotify.workerGracePeriod" -}}
{{- add (include "shipnotify.workerStopTimeoutSeconds" . | int) .Values.worker.terminationMarginSeconds }}
{{- end }}

{{- define "shipnotify.serveGracePeriod" -}}
{{- add .Values.serve.requestTimeoutSeconds (include "shipnotify.serveShutdownMarginSeconds" . | int) .Values.serve.terminationMarginSeconds }}
{{- end }}

{{/*
Mirror connections: the most each process's pool opens (internal/cli.WorkerPoolSize and its
siblings), and the fleet's peak against the server's max_connections. A rolling update runs one
pod more than the replicas of each Deployment (maxSurge 1), and migrate runs beside the fleet.
*/}}
{{- define "shipnotify.workerPoolSize" -}}
{{- add (include "shipnotify.workerMaxActivities" . | int) 4 }}
{{- end }}
{{- define "shipnotify.servePoolSize" -}}16{{- end }}
{{- define "shipnotify.migratePoolSize" -}}2{{- end }}

{{- define "shipnotify.maxWorkers" -}}
{{- if eq .Values.worker.autoscaling.mode "none" }}
{{- .Values.worker.replicas }}
{{- else }}
{{- .Values.worker.autoscaling.maxReplicas }}
{{- end }}
{{- end }}

{{/*
Notify slots per worker. Their one home is the binary's default (config.DefaultWorkerMaxActivities,
held equal by deploy's tests); worker.maxActivities 0 derives them: what the budget leaves the
workers after serve and migrate, shared by the most workers this mode runs plus one in a rollout,
less each pool's spare 4, and at most the binary's default.
*/}}
{{- define "shipnotify.binaryMaxActivities" -}}200{{- end }}
{{- define "shipnotify.workerMaxActivities" -}}
{{- if .Values.worker.maxActivities }}
{{- .Values.worker.maxActivities | int }}
{{- else }}
{{- $budget := sub .Values.mirror.maxConnections .Values.mirror.reservedConnections | int }}
{{- $others := add (mul (add .Values.serve.replicas 1) (include "shipnotify.servePoolSize" . | int)) (include "shipnotify.migratePoolSize" . | int) }}
{{- $perWorker := div (sub $budget $others) (add (include "shipnotify.maxWorkers" . | int) 1) }}
{{- min (sub $perWorker 4) (include "shipnotify.binaryMaxActivities" . | int) }}
{{- end }}
{{- end }}

{{- define "shipnotify.mirrorConnections" -}}
{{- $workers := mul (add (include "shipnotify.maxWorkers" . | int) 1) (include "shipnotify.workerPoolSize" . | int) }}
{{- $serves := mul (add .Values.serve.replicas 1) (include "shipnotify.servePoolSize" . | int) }}
{{- add $workers $serves (include "shipnotify.migratePoolSize" . | int) }}
{{- end }}

{{/* validate fails the render on settings that cannot work together. */}}
{{- define "shipnotify.validate" -}}
{{- $budget := sub .Values.mirror.maxConnections .Values.mirror.reservedConnections | int }}
{{- $peak := include "shipnotify.mirrorConnections" . | int }}
{{- if lt (include "shipnotify.workerMaxActivities" . | int) 1 }}
{{- fail (printf "mirror connections: worker.maxActivities is derived from the budget (it is 0), and mirror.maxConnections %d - mirror.reservedConnections %d leaves the workers no slot: (%d + 1 during a rollout) workers need 5 connections each beside serve's (%d + 1) x %d and migrate's %d. Raise max_connections on the server and mirror.maxConnections with it, or lower the replicas" (int .Values.mirror.maxConnections) (int .Values.mirror.reservedConnections) (include "shipnotify.maxWorkers" . | int) (int .Values.serve.replicas) (include "shipnotify.servePoolSize" . | int) (include "shipnotify.migratePoolSize" . | int)) }}
{{- end }}
{{- if gt $peak $budget }}
{{- fail (printf "mirror connections: the processes could open %d (workers: (%d + 1 during a rollout) x (worker.maxActivities %d + 4); serve: (%d + 1) x %d; migrate: %d), more than mirror.maxConnections %d - mirror.reservedConnections %d = %d. Lower worker.maxActivities (0 derives it from the budget) or the replicas (worker.autoscaling.maxReplicas when autoscaling), or raise max_connections on the server and mirror.maxConnections with it" $peak (include "shipnotify.maxWorkers" . | int) (include "shipnotify.workerMaxActivities" . | int) (int .Values.serve.replicas) (include "shipnotify.servePoolSize" . | int) (include "shipnotify.migratePoolSize" . | int) (int .Values.mirror.maxConnections) (int .Values.mirror.reservedConnections) $budget) }}
{{- end }}
{{- if and (ne .Values.worker.autoscaling.mode "none") (lt (int .Values.worker.autoscaling.maxReplicas) (int .Values.worker.replicas)) }}
{{- fail (printf "worker.autoscaling.maxReplicas (%d) is below worker.replicas (%d), the floor autoscaling keeps" (int .Values.worker.autoscaling.maxReplicas) (int .Values.worker.replicas)) }}
{{- end }}
{{- if and .Values.serve.ingress.enabled (not .Values.serve.ingress.tlsSecretName) }}
{{- fail "serve.ingress.tlsSecretName: the ingress carries API keys and console sessions, so it needs TLS; name the Secret with its certificate" }}
{{- end }}
{{- if and (hasKey .Values.worker "activitiesPerSecond") (ne (toString .Values.worker.activitiesPerSecond) (toString .Values.worker.sendsPerSecond)) (ne (toString .Values.worker.sendsPerSecond) "0") }}
{{- fail (printf "worker.sendsPerSecond (%v) and worker.activitiesPerSecond (%v, its deprecated name) set to different caps: set worker.sendsPerSecond only" .Values.worker.sendsPerSecond .Values.worker.activitiesPerSecond) }}
{{- end }}
{{- if and .Values.config.publicURL (not (hasPrefix "https://" .Values.config.publicURL)) }}
{{- fail (printf "config.publicURL: %q must be https (the console's cookies and the escalation links need it)" .Values.config.publicURL) }}
{{- end }}
{{- end }}

{{/* sendsPerSecond is the provider's rate cap: worker.sendsPerSecond, or
worker.activitiesPerSecond, its deprecated name, when only that is set. */}}
{{- define "shipnotify.sendsPerSecond" -}}
{{- if and (hasKey .Values.worker "activitiesPerSecond") (eq (toString .Values.worker.sendsPerSecond) "0") }}
{{- .Values.worker.activitiesPerSecond }}
{{- else }}
{{- .Values.worker.sendsPerSecond }}
{{- end }}
{{- end }}

{{/*
Environment. Each process gets the variables it reads and only the secrets it uses.
*/}}
{{- define "shipnotify.temporalEnv" -}}
- name: TEMPORAL_ADDRESS
  value: {{ .Values.temporal.address | quote }}
- name: TEMPORAL_NAMESPACE
  value: {{ .Values.temporal.namespace | quote }}
- name: SHIPNOTIFY_TASK_QUEUE
  value: {{ .Values.temporal.taskQueue | quote }}
{{- if or .Values.temporal.tls.enabled .Values.temporal.mtls.existingSecret .Values.temporal.apiKey.existingSecret }}
- name: TEMPORAL_TLS
  value: "true"
{{- end }}
{{- with .Values.temporal.tls.serverName }}
- name: TEMPORAL_TLS_SERVER_NAME
  value: {{ . | quote }}
{{- end }}
{{- with .Values.temporal.mtls.existingSecret }}
- name: TEMPORAL_TLS_CLIENT_CERT_PATH
  value: /etc/shipnotify/temporal-tls/{{ $.Values.temporal.mtls.certKey }}
- name: TEMPORAL_TLS_CLIENT_KEY_PATH
  value: /etc/shipnotify/temporal-tls/{{ $.Values.temporal.mtls.keyKey }}
{{- with $.Values.temporal.mtls.caKey }}
- name: TEMPORAL_TLS_SERVER_CA_CERT_PATH
  value: /etc/shipnotify/temporal-tls/{{ . }}
{{- end }}
{{- end }}
{{- with .Values.temporal.apiKey.existingSecret }}
- name: TEMPORAL_API_KEY
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $.Values.temporal.apiKey.key }}
{{- end }}
{{- end }}

{{- define "shipnotify.temporalVolumeMounts" -}}
{{- if .Values.temporal.mtls.existingSecret }}
- name: temporal-tls
  mountPath: /etc/shipnotify/temporal-tls
  readOnly: true
{{- end }}
{{- end }}

{{- define "shipnotify.temporalVolumes" -}}
{{- with .Values.temporal.mtls.existingSecret }}
- name: temporal-tls
  secret:
    secretName: {{ . }}
    defaultMode: 0440
    items:
      - key: {{ $.Values.temporal.mtls.certKey }}
        path: {{ $.Values.temporal.mtls.certKey }}
      - key: {{ $.Values.temporal.mtls.keyKey }}
        path: {{ $.Values.temporal.mtls.keyKey }}
      {{- with $.Values.temporal.mtls.caKey }}
      - key: {{ . }}
        path: {{ . }}
      {{- end }}
{{- end }}
{{- end }}

{{/* secretEnv is one variable from a key of shipnotify's Secret. */}}
{{- define "shipnotify.secretEnv" -}}
- name: {{ .name }}
  valueFrom:
    secretKeyRef:
      name: {{ .root.Values.secrets.existingSecret }}
      key: {{ .key }}
{{- end }}

{{- define "shipnotify.commonEnv" -}}
- name: SHIPNOTIFY_LOG_LEVEL
  value: {{ .Values.config.logLevel | quote }}
- name: SHIPNOTIFY_METRICS_ADDR
  value: ":9090"
- name: DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ .Values.mirror.runtime.existingSecret }}
      key: {{ .Values.mirror.runtime.key }}
{{ include "shipnotify.secretEnv" (dict "root" . "name" "SHIPNOTIFY_CODEC_KEYS" "key" "codec-keys") }}
{{- with .Values.config.publicURL }}
- name: SHIPNOTIFY_PUBLIC_URL
  value: {{ . | quote }}
{{- end }}
{{ include "shipnotify.secretEnv" (dict "root" . "name" "SHIPNOTIFY_LINK_KEY" "key" "link-key") }}
{{ include "shipnotify.temporalEnv" . }}
{{- end }}

{{- define "shipnotify.podSecurity" -}}
automountServiceAccountToken: false
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* scratch is a writable /tmp on a read-only root filesystem. */}}
{{- define "shipnotify.tmpMount" -}}
- name: tmp
  mountPath: /tmp
{{- end }}
{{- define "shipnotify.tmpVolume" -}}
- name: tmp
  emptyDir:
    sizeLimit: 16Mi
{{- end }}

{{- define "shipnotify.probes" -}}
livenessProbe:
  httpGet:
    path: /healthz
    port: {{ .port }}
  periodSeconds: 10
  timeoutSeconds: 5
  failureThreshold: 6
readinessProbe:
  httpGet:
    path: /readyz
    port: {{ .port }}
  periodSeconds: 10
  timeoutSeconds: 5
  failureThreshold: 3
startupProbe:
  httpGet:
    path: /healthz
    port: {{ .port }}
  periodSeconds: 2
  failureThreshold: 60
{{- end }}
