{{/*
The labels of every object: app.kubernetes.io/name (the one label dist/install.yaml sets, and the
selector of the operator's pods) and Helm's.
*/}}
{{- define "etcd-operator.labels" -}}
app.kubernetes.io/name: etcd-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/* The selector of the operator's pods, as in dist/install.yaml. */}}
{{- define "etcd-operator.selector" -}}
app.kubernetes.io/name: etcd-operator
{{- end }}

{{/* The operator's image reference. */}}
{{- define "etcd-operator.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* Whether cert-manager provides the webhook certificate ("true" or ""). */}}
{{- define "etcd-operator.certManager" -}}
{{- if eq .Values.webhook.certProvisioner "certManager" }}true{{ else if ne .Values.webhook.certProvisioner "self" }}{{ fail (printf "webhook.certProvisioner must be self or certManager, not %q" .Values.webhook.certProvisioner) }}{{ end }}
{{- end }}

{{/* The namespaces the operator watches, as a list; with namespaced, the release's by default. */}}
{{- define "etcd-operator.watchNamespaces" -}}
{{- if .Values.watchNamespaces }}{{ toJson .Values.watchNamespaces }}{{ else if .Values.namespaced }}{{ toJson (list .Release.Namespace) }}{{ else }}[]{{ end }}
{{- end }}

{{/* The ServiceAccount as a subject of a binding. */}}
{{- define "etcd-operator.subject" -}}
- kind: ServiceAccount
  name: etcd-operator
  namespace: {{ .Release.Namespace }}
{{- end }}
