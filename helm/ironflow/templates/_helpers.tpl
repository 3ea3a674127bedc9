{{- define "ironflow.labels" -}}
app.kubernetes.io/name: ironflow
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{/* The Secret holding IRONFLOW_SIGNING_KEY: the given one, else the chart's own. */}}
{{- define "ironflow.signingKeySecretName" -}}
{{- if .Values.signingKeySecret }}{{ .Values.signingKeySecret.name }}{{ else }}{{ .Release.Name }}-signing-key{{ end -}}
{{- end -}}

{{- define "ironflow.signingKeySecretKey" -}}
{{- if .Values.signingKeySecret }}{{ .Values.signingKeySecret.key }}{{ else }}key{{ end -}}
{{- end -}}
