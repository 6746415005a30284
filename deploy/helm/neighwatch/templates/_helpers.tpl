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

{{/* The objects' namespace: namespaceOverride, or the release's. */}}
{{- define "neighwatch.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
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
{{- with .Values.commonLabels }}
{{- include "neighwatch.ownLabelsRefused" (dict "labels" . "from" "commonLabels") }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
The labels of the DaemonSet's pods beyond the selector's: commonLabels,
as on every object, and podLabels, which win on a key both set.
*/}}
{{- define "neighwatch.podLabels" -}}
{{- include "neighwatch.ownLabelsRefused" (dict "labels" (default dict .Values.podLabels) "from" "podLabels") -}}
{{- $l := merge (deepCopy (default dict .Values.podLabels)) (default dict .Values.commonLabels) -}}
{{- with $l }}
{{- toYaml . }}
{{- end }}
{{- end -}}

{{/*
Refuses a label the chart sets itself: rendered twice, the key would be
a duplicate in every object (and the API server takes the last).
*/}}
{{- define "neighwatch.ownLabelsRefused" -}}
{{- range $k, $_ := .labels }}
{{- if has $k (list "app.kubernetes.io/name" "app.kubernetes.io/instance" "app.kubernetes.io/version" "app.kubernetes.io/managed-by" "helm.sh/chart") }}
{{- fail (printf "%s: %s is a label the chart sets itself (the selector, the release, the version); set nameOverride or fullnameOverride to change the name, or choose another key" $.from $k) }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
The image: registry/repository, by digest if one is set, else by tag. An
umbrella chart's global.imageRegistry wins over image.registry.
*/}}
{{- define "neighwatch.image" -}}
{{- $repo := .Values.image.repository -}}
{{- $registry := .Values.image.registry -}}
{{- with .Values.global }}{{- with .imageRegistry }}{{- $registry = . -}}{{- end }}{{- end }}
{{- if $registry -}}{{- $repo = printf "%s/%s" $registry $repo -}}{{- end -}}
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
job="<jobName>". Every matcher on a label the chart gives the series
(job: jobName; namespace: the chart's namespace) must match what it
gives, or no rule would match a series: such a selector is refused, with
the fix. Matchers on other labels (external labels, a region of the
monitors' relabelings) are the operator's to know.
*/}}
{{- define "neighwatch.jobSelector" -}}
{{- $sel := .Values.prometheusRule.jobSelector -}}
{{- if not $sel -}}
{{- printf "job=%q" .Values.jobName -}}
{{- else -}}
{{- $matcher := `([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"` -}}
{{- if not (regexMatch (printf `^\s*%s(\s*,\s*%s)*\s*,?\s*$` $matcher $matcher) $sel) -}}
{{- fail (printf "prometheusRule.jobSelector %s is not a list of PromQL label matchers (name=\"value\", name=~\"regex\", ...): write it as it stands between the braces of a selector" $sel) -}}
{{- end -}}
{{- $given := dict "job" .Values.jobName "namespace" (include "neighwatch.namespace" .) -}}
{{- range $m := regexFindAll $matcher $sel -1 -}}
{{- $name := regexReplaceAll (printf "^%s$" $matcher) $m "${1}" -}}
{{- $op := regexReplaceAll (printf "^%s$" $matcher) $m "${2}" -}}
{{- $value := regexReplaceAll (printf "^%s$" $matcher) $m "${3}" | replace `\\` `\` | replace `\"` `"` -}}
{{- if hasKey $given $name -}}
{{- $have := get $given $name -}}
{{- $ok := true -}}
{{- if eq $op "=" }}{{ $ok = eq $value $have }}{{ end -}}
{{- if eq $op "!=" }}{{ $ok = ne $value $have }}{{ end -}}
{{- if eq $op "=~" }}{{ $ok = regexMatch (printf "^(?:%s)$" $value) $have }}{{ end -}}
{{- if eq $op "!~" }}{{ $ok = not (regexMatch (printf "^(?:%s)$" $value) $have) }}{{ end -}}
{{- if not $ok -}}
{{- if eq $name "job" -}}
{{- fail (printf "prometheusRule.jobSelector %s does not match the job the monitors set (jobName %q), so no rule would match a series: set jobName to the job you want, or leave jobSelector empty" $sel $have) -}}
{{- else -}}
{{- fail (printf "prometheusRule.jobSelector %s does not match the namespace the agents run in (%q), so no rule would match a series: drop the namespace matcher, or set namespaceOverride" $sel $have) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $sel -}}
{{- end -}}
{{- end -}}

{{/* True where prometheus-operator's API is served. */}}
{{- define "neighwatch.monitoringAPI" -}}
{{- if .Capabilities.APIVersions.Has "monitoring.coreos.com/v1" -}}true{{- end -}}
{{- end -}}

{{/*
The pull secrets: an umbrella chart's global.imagePullSecrets, then
imagePullSecrets; each a name or {name: ...}.
*/}}
{{- define "neighwatch.imagePullSecrets" -}}
{{- $all := list -}}
{{- with .Values.global }}{{- $all = concat $all (default list .imagePullSecrets) -}}{{- end }}
{{- $all = concat $all .Values.imagePullSecrets -}}
{{- range $all }}
{{- if kindIs "string" . }}
- name: {{ . }}
{{- else }}
- {{ toYaml . | nindent 2 | trim }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
A monitor's endpoint settings beyond port, interval and the relabelling
the rules need: scrapeTimeout, honorLabels, scheme, TLS and auth, and the
user's relabelings (after the chart's) and metricRelabelings. $ is the
monitor's values.
*/}}
{{- define "neighwatch.endpointExtras" -}}
{{- with .scrapeTimeout }}
{{- if and $.interval (gt (include "neighwatch.seconds" . | float64) (include "neighwatch.seconds" $.interval | float64)) }}
{{- fail (printf "scrapeTimeout %s is longer than the monitor's interval %s: Prometheus refuses such a target; set scrapeTimeout at most the interval" . $.interval) }}
{{- end }}
scrapeTimeout: {{ . }}
{{- end }}
{{- if .honorLabels }}
honorLabels: true
{{- end }}
{{- with .scheme }}
scheme: {{ . }}
{{- end }}
{{- with .tlsConfig }}
tlsConfig:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .basicAuth }}
basicAuth:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .authorization }}
authorization:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .metricRelabelings }}
metricRelabelings:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
A Prometheus duration ("1m30s", "500ms", "1h") in seconds, to compare
two of them.
*/}}
{{- define "neighwatch.seconds" -}}
{{- $units := dict "ms" 0.001 "s" 1.0 "m" 60.0 "h" 3600.0 "d" 86400.0 "w" 604800.0 "y" 31536000.0 -}}
{{- $total := 0.0 -}}
{{- range regexFindAll "[0-9]+(ms|y|w|d|h|m|s)" (toString .) -1 -}}
{{- $n := regexFind "^[0-9]+" . | float64 -}}
{{- $total = addf $total (mulf $n (get $units (regexReplaceAll "^[0-9]+" . ""))) -}}
{{- end -}}
{{- $total -}}
{{- end -}}

{{/*
The pod's affinity: .Values.affinity, with excludeVirtualNodes' two terms
added to each required nodeSelectorTerm (terms are ORed, a term's
expressions ANDed: a node must be no virtual node and match the term),
or made the one term where affinity has none.
*/}}
{{- define "neighwatch.affinity" -}}
{{- $aff := deepCopy (default dict .Values.affinity) -}}
{{- if .Values.excludeVirtualNodes -}}
{{- $virtual := list
  (dict "key" "eks.amazonaws.com/compute-type" "operator" "NotIn" "values" (list "fargate"))
  (dict "key" "type" "operator" "NotIn" "values" (list "virtual-kubelet")) -}}
{{- $na := default dict $aff.nodeAffinity -}}
{{- $req := default dict $na.requiredDuringSchedulingIgnoredDuringExecution -}}
{{- $terms := list -}}
{{- range $t := default list $req.nodeSelectorTerms -}}
{{- $_ := set $t "matchExpressions" (concat (default list $t.matchExpressions) $virtual) -}}
{{- $terms = append $terms $t -}}
{{- end -}}
{{- if not $terms -}}
{{- $terms = list (dict "matchExpressions" $virtual) -}}
{{- end -}}
{{- $_ := set $req "nodeSelectorTerms" $terms -}}
{{- $_ := set $na "requiredDuringSchedulingIgnoredDuringExecution" $req -}}
{{- $_ := set $aff "nodeAffinity" $na -}}
{{- end -}}
{{- with $aff -}}
{{- toYaml . -}}
{{- end -}}
{{- end -}}

{{/*
The mixin's _config as the values set it, a setting per slot of the
chart's renders of the mixin: prometheusRule's job selector (or the
monitors' job), cluster label, runbook site, thresholds and the fleet alert's keep_firing_for, the
percentage the alerts' sentences derive from tableNearThreshold, and each
alert's for and severity.
*/}}
{{- define "neighwatch.mixinConfig" -}}
{{- $r := .Values.prometheusRule -}}
{{- $near := toString $r.tableNearThreshold -}}
{{- $c := dict
  "jobSelector" (include "neighwatch.jobSelector" .)
  "clusterLabel" $r.clusterLabel
  "runbookURL" $r.runbookURL
  "tableNearThreshold" $near
  "tableNearThresholdPercent" (printf "%d" (int (round (mulf (float64 $near) 100) 0)))
  "resyncStormRate" (toString $r.resyncStormRate)
  "moveCheckWait" (toString $r.moveCheckWait)
  "fleetKeepFiringFor" (toString $r.fleetKeepFiringFor) -}}
{{- range $name, $a := $r.alerts -}}
{{- $_ := set $c (printf "alerts.%s.for" $name) (toString (default "" $a.for)) -}}
{{- $_ := set $c (printf "alerts.%s.severity" $name) (toString (default "" $a.severity)) -}}
{{- end -}}
{{- toJson $c -}}
{{- end -}}

{{/*
Fills the slots ("@@name@@") of one of the chart's renders of the mixin
(.text, JSON, from .file) with neighwatch.mixinConfig: each value
JSON-escaped, as it stands inside a string. A slot left unfilled is
refused: the mixin has a setting the values do not carry.
*/}}
{{- define "neighwatch.fillSlots" -}}
{{- $text := .text -}}
{{- range $k, $v := include "neighwatch.mixinConfig" .root | fromJson -}}
{{- $text = $text | replace (printf "@@%s@@" $k) ($v | toJson | trimPrefix "\"" | trimSuffix "\"") -}}
{{- end -}}
{{- with regexFind "@@[^@]*@@" $text -}}
{{- fail (printf "%s: the mixin's setting %s has no value in prometheusRule: set it there" $.file .) -}}
{{- end -}}
{{- $text -}}
{{- end -}}
