{{- define "ironflow.labels" -}}
app.kubernetes.io/name: ironflow
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}
