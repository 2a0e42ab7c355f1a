{{/* The release's name for eos's objects: <release>-eos, or the release if it has "eos" in it. */}}
{{- define "eos.fullname" -}}
{{- if contains "eos" .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-eos" .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "eos.selectorLabels" -}}
app.kubernetes.io/name: eos
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "eos.labels" -}}
{{ include "eos.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: worker
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "eos.headless" -}}
{{ include "eos.fullname" . }}-headless
{{- end -}}

{{/* http, or https with rest.tls.secretName (kubelet's probes then use HTTPS). */}}
{{- define "eos.scheme" -}}
{{- if .Values.rest.tls.secretName -}}
{{- if eq .Values.rest.tls.clientAuth "required" -}}
{{- fail "rest.tls.clientAuth=required: kubelet's probes present no client certificate; use requested (certificates are checked when presented)" -}}
{{- end -}}
https
{{- else -}}
http
{{- end -}}
{{- end -}}

{{/* The scrape's scheme, and with TLS its tlsConfig (monitoring.tlsConfig: Prometheus
scrapes pod addresses, which the certificate does not name). */}}
{{- define "eos.scrapeTls" -}}
scheme: {{ include "eos.scheme" . }}
{{- if .Values.rest.tls.secretName }}
tlsConfig:
  {{- toYaml .Values.monitoring.tlsConfig | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The image tag when image.tag is empty: the chart's appVersion, "-slim" for slim. */}}
{{- define "eos.defaultTag" -}}
{{- if eq .Values.image.variant "slim" -}}
{{ .Chart.AppVersion }}-slim
{{- else -}}
{{ .Chart.AppVersion }}
{{- end -}}
{{- end -}}
