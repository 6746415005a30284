{{/* The chart's name, or nameOverride. */}}
{{- define "neighwatch.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The objects' name: the release's if it holds the chart's name. */}}
{{- define "neighwatch.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* What selects the agent's pods. */}}
{{- define "neighwatch.selectorLabels" -}}
app.kubernetes.io/name: {{ include "neighwatch.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Every object's labels. */}}
{{- define "neighwatch.labels" -}}
{{ include "neighwatch.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The image: registry/repository, by digest if one is set, else by tag. */}}
{{- define "neighwatch.image" -}}
{{- $repo := .Values.image.repository -}}
{{- if .Values.image.registry -}}{{- $repo = printf "%s/%s" .Values.image.registry $repo -}}{{- end -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repo .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/*
The container's securityContext: securityContext's fields, with one
capabilities key: drop ALL (or securityContext.capabilities.drop) and add
.Values.capabilities plus securityContext.capabilities.add. A privileged
container may escalate anyway, and the API server refuses privileged
beside allowPrivilegeEscalation false: privileged drops it.
*/}}
{{- define "neighwatch.securityContext" -}}
{{- $sc := omit (deepCopy .Values.securityContext) "capabilities" -}}
{{- $user := default dict .Values.securityContext.capabilities -}}
{{- $add := concat .Values.capabilities (default list $user.add) | uniq -}}
{{- $drop := default (list "ALL") $user.drop -}}
{{- $_ := set $sc "capabilities" (dict "drop" $drop "add" $add) -}}
{{- if $sc.privileged -}}
{{- $_ := unset $sc "allowPrivilegeEscalation" -}}
{{- end -}}
{{- toYaml $sc -}}
{{- end -}}

{{/* The job label the monitors give the agents' series. */}}
{{- define "neighwatch.job" -}}
{{- .Values.jobName -}}
{{- end -}}

{{/*
The rules' selector of the agents' series: prometheusRule.jobSelector, or
job="<jobName>". A selector of one job that is not jobName would match no
series the monitors label: refused, with the fix.
*/}}
{{- define "neighwatch.jobSelector" -}}
{{- $sel := .Values.prometheusRule.jobSelector -}}
{{- if not $sel -}}
{{- printf "job=%q" .Values.jobName -}}
{{- else -}}
{{- $m := regexFind "^job=\"[^\"]*\"$" $sel -}}
{{- if and $m (ne $sel (printf "job=%q" .Values.jobName)) -}}
{{- fail (printf "prometheusRule.jobSelector %s selects another job than the monitors set (jobName %q): set jobName to that job, or leave jobSelector empty" $sel .Values.jobName) -}}
{{- end -}}
{{- $sel -}}
{{- end -}}
{{- end -}}

{{/* True where prometheus-operator's API is served. */}}
{{- define "neighwatch.monitoringAPI" -}}
{{- if .Capabilities.APIVersions.Has "monitoring.coreos.com/v1" -}}true{{- end -}}
{{- end -}}
