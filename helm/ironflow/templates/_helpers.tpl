{{- define "ironflow.labels" -}}
app.kubernetes.io/name: ironflow
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The selector of one service's pods; call with (dict "root" $ "name" $name). */}}
{{- define "ironflow.selector" -}}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .name }}
{{- end -}}

{{/* The Secret every credential comes from (README "Install with Helm"). */}}
{{- define "ironflow.secretName" -}}
{{- .Values.secrets.name | default (printf "%s-ironflow" .Release.Name) -}}
{{- end -}}

{{/*
IRONFLOW_CLUSTER_ID: `clusterId`, else the release name with each "." as "_" (a release name may
hold dots, a cluster id may not: it stands in NATS subjects; release names never hold "_", so two
releases never get one id).
*/}}
{{- define "ironflow.clusterId" -}}
{{- .Values.clusterId | default (.Release.Name | replace "." "_") -}}
{{- end -}}

{{/* The ingress's request body cap, bytes: IRONFLOW_MAX_PAYLOAD_BYTES (settings, else 4 MiB) + 1 MiB. */}}
{{- define "ironflow.ingressBodyBytes" -}}
{{- add (int64 (index .Values.settings "IRONFLOW_MAX_PAYLOAD_BYTES" | default "4194304")) 1048576 -}}
{{- end -}}

{{/* Seconds Kubernetes waits before SIGKILL: the preStop sleep, the shutdown cap, a margin. */}}
{{- define "ironflow.terminationGracePeriodSeconds" -}}
{{- $s := .Values.shutdown -}}
{{- add (int $s.preStopSleepSeconds) (div (add (int64 $s.timeoutMs) 999) 1000) (int $s.marginSeconds) -}}
{{- end -}}
