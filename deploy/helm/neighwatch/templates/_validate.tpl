{{/*
The values an operator brings from prometheus-community's node-exporter
chart or Cilium's that would render a broken agent, or one that runs
without what it needs, each refused with one line saying what to set
instead. daemonset.yaml includes it, so every render runs it.
*/}}
{{- define "neighwatch.validate" -}}
{{- include "neighwatch.foreignValues" . -}}
{{- include "neighwatch.unknownKeys" . -}}
{{- include "neighwatch.checkConfig" . -}}
{{- include "neighwatch.admissible" . -}}
{{- include "neighwatch.podSecurity" . -}}
{{- include "neighwatch.runsAsRoot" . -}}
{{- include "neighwatch.monitorsKeepJob" . -}}
{{- end -}}

{{/*
Keys of the node-exporter and Cilium charts that this chart spells
otherwise or has no use for (the schema lets them through so that the
render can say what to set).
*/}}
{{- define "neighwatch.foreignValues" -}}
{{- $advice := dict
  "containerSecurityContext" "this chart's container securityContext is securityContext (node-exporter's securityContext, the pod's, is podSecurityContext here)"
  "releaseLabel" "set podMonitor.additionalLabels.release (or serviceMonitor's) and prometheusRule.additionalLabels.release to kube-prometheus-stack's release name"
  "prometheus" "node-exporter's prometheus.monitor and Cilium's prometheus.serviceMonitor are podMonitor and serviceMonitor here, and jobName is the job they set"
  "jobLabel" "set jobName: the job label both monitors give the agents' series and the rules select"
  "env" "extraEnv is this chart's list of the container's environment ({name, value} or valueFrom)"
  "annotations" "daemonsetAnnotations are the DaemonSet's, podAnnotations its pods'"
  "extraHostVolumeMounts" "give a hostPath volume in extraVolumes and its mount in extraVolumeMounts"
  "kubeRBACProxy" "the agent serves TLS and authentication itself: mount a web config and pass --web.config.file in extraArgs (docs/running.md)"
  "serviceAccount" "the agent calls no Kubernetes API and mounts no token; remove it"
  "rbac" "the agent calls no Kubernetes API; remove it"
  "startupProbe" "the agent is ready within seconds of starting; tune readinessProbe and livenessProbe"
-}}
{{- if and (hasKey .Values "hostNetwork") (not .Values.hostNetwork) }}
{{- fail "hostNetwork false: the agent reads the node's neighbour tables and listens on its interfaces, so it runs on the host network; remove hostNetwork" }}
{{- end }}
{{- if .Values.hostPID }}
{{- fail "hostPID true: the agent needs no host PID namespace; remove hostPID" }}
{{- end }}
{{- $advice = merge $advice (dict
  "sidecars" "more containers of the pod are extraContainers in this chart (Cilium's name), as Kubernetes writes them"
  "lifecycle" "the agent releases its managed entries and detaches its datapath on SIGTERM by itself, and a preStop hook only delays that; set terminationGracePeriodSeconds for how long it may take"
  "extraEnvVars" "extraEnv is this chart's list of the container's environment ({name, value} or valueFrom)") -}}
{{- range $k, $why := $advice }}
{{- if hasKey $.Values $k }}
{{- fail (printf "%s is not a value of this chart: %s" $k $why) }}
{{- end }}
{{- end }}
{{- range $m := list "podMonitor" "serviceMonitor" }}
{{- $v := default dict (index $.Values $m) }}
{{- if hasKey $v "labels" }}
{{- fail (printf "%s.labels is not a value of this chart: the monitor's own labels are %s.additionalLabels (kube-prometheus-stack's Prometheus selects monitors by release: set additionalLabels.release)" $m $m) }}
{{- end }}
{{- if hasKey $v "namespaceSelector" }}
{{- fail (printf "%s.namespaceSelector is not a value of this chart: the monitor selects the agents in their own namespace, wherever %s.namespace puts it; set %s.namespace for the monitor's" $m $m $m) }}
{{- end }}
{{- end }}
{{- range $k, $why := dict
  "useDigest" "the chart pulls by digest when image.digest is set (sha256:...), which wins over the tag"
  "distroless" "the image is built FROM scratch: the agent's static binary and nothing else" }}
{{- if hasKey (default dict $.Values.image) $k }}
{{- fail (printf "image.%s is not a value of this chart: %s" $k $why) }}
{{- end }}
{{- end }}
{{- with .Values.service }}{{ if hasKey . "portName" }}
{{- fail "service.portName is not a value of this chart: the metrics port is named metrics, which the PodMonitor and the ServiceMonitor select; its number is port" }}
{{- end }}{{ end }}
{{- $rule := default dict .Values.prometheusRule }}
{{- range $k, $why := dict
  "create" "the rules are rendered when prometheusRule.enabled is true (and the cluster serves monitoring.coreos.com/v1)"
  "rules" "the rules are the monitoring mixin's, tuned in prometheusRule.alerts (for, severity, disabled); add rules of your own in a PrometheusRule of your own"
  "runbookURLPattern" "each alert's runbook_url is prometheusRule.runbookURL with #alertname, lowercased (the runbook's sections): set runbookURL to the page" }}
{{- if hasKey $rule $k }}
{{- fail (printf "prometheusRule.%s is not a value of this chart: %s" $k $why) }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
The agent runs as root holding only .Values.capabilities (ALL others
dropped). A non-root user gets none of them: Kubernetes adds a container's
capabilities to the bounding set, not to a non-root process's effective
set, so the agent would mirror the table and see nothing else. Fields of
a pod's securityContext in the container's are refused (the API server
would reject them), as are capability lists other than add and drop.
*/}}
{{- define "neighwatch.runsAsRoot" -}}
{{- $c := default dict .Values.securityContext -}}
{{- $p := default dict .Values.podSecurityContext -}}
{{- range $k := list "fsGroup" "fsGroupChangePolicy" "supplementalGroups" "supplementalGroupsPolicy" "sysctls" "seLinuxChangePolicy" }}
{{- if hasKey $c $k }}
{{- fail (printf "securityContext.%s is a field of the pod's securityContext, which is podSecurityContext in this chart (securityContext is the container's): move it to podSecurityContext.%s" $k $k) }}
{{- end }}
{{- end }}
{{- range $k, $_ := default dict $c.capabilities }}
{{- if eq $k "ciliumAgent" }}
{{- fail "securityContext.capabilities.ciliumAgent is Cilium's list: this chart adds capabilities (each with its reason in values.yaml) and drops ALL others; add more in securityContext.capabilities.add" }}
{{- else if not (has $k (list "add" "drop")) }}
{{- fail (printf "securityContext.capabilities.%s: a container's capabilities are add and drop; this chart adds capabilities and drops ALL others" $k) }}
{{- end }}
{{- end }}
{{- $from := "podSecurityContext" -}}
{{- $user := $p.runAsUser -}}
{{- if not (kindIs "invalid" $c.runAsUser) }}{{- $user = $c.runAsUser }}{{- $from = "securityContext" }}{{- end }}
{{- if and (not (kindIs "invalid" $user)) (ne (toString $user) "0") }}
{{- fail (printf "%s.runAsUser %v: the agent must run as root: Kubernetes gives a non-root container's added capabilities (NET_ADMIN, NET_RAW, BPF, PERFMON) only to its bounding set, so the agent would mirror the table and be blind; remove runAsUser (ALL other capabilities are dropped)" $from $user) }}
{{- end }}
{{- $nonRoot := $p.runAsNonRoot -}}
{{- $from = "podSecurityContext" -}}
{{- if not (kindIs "invalid" $c.runAsNonRoot) }}{{- $nonRoot = $c.runAsNonRoot }}{{- $from = "securityContext" }}{{- end }}
{{- if $nonRoot }}
{{- fail (printf "%s.runAsNonRoot true: the agent runs as root with only its capabilities (ALL others dropped), and a non-root agent holds none of them; remove runAsNonRoot" $from) }}
{{- end }}
{{- end -}}

{{/*
A monitor's relabeling that writes or drops the job label: the rules
select the job the chart gives (jobName), and would match no series.
*/}}
{{- define "neighwatch.monitorsKeepJob" -}}
{{- range $m := list "podMonitor" "serviceMonitor" }}
{{- $v := index $.Values $m }}
{{- if $v.enabled }}
{{- range $list := list "relabelings" "metricRelabelings" }}
{{- range $i, $r := default list (index $v $list) }}
{{- $action := lower (default "replace" $r.action) }}
{{- $writes := and (eq (default "" $r.targetLabel) "job") (has $action (list "replace" "lowercase" "uppercase" "hashmod")) }}
{{- $drops := and (eq $action "labeldrop") (regexMatch (printf "^(?:%s)$" (default "(.*)" $r.regex)) "job") }}
{{- $keepsNot := and (eq $action "labelkeep") (not (regexMatch (printf "^(?:%s)$" (default "(.*)" $r.regex)) "job")) }}
{{- if or $writes $drops $keepsNot }}
{{- fail (printf "%s.%s[%d] %s the job label, which the rules select (job=%q) and no rule would match: set jobName to the job you want, and leave job out of the relabeling" $m $list $i (ternary "writes" "drops" $writes) $.Values.jobName) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
What the agent runs without, as the values stand: NOTES says it under
WARNING, a line each. The agent names the same at start, in its log.
*/}}
{{- define "neighwatch.notesWarnings" -}}
{{- $c := default dict .Values.securityContext -}}
{{- if not $c.privileged }}
{{- $need := dict
  "NET_ADMIN" "remediation, tcx and clsact attachment, and a netlink buffer past rmem_max"
  "NET_RAW" "the ARP and NDP evidence and probes: no host is ever found stuck"
  "BPF" "bpf(2): no tracer, no datapath, no bypassing traffic counted"
  "PERFMON" "the tracer's programs: no bypassing traffic counted" -}}
{{- $have := concat .Values.capabilities (default list (default dict $c.capabilities).add) }}
{{- range $cap, $loses := $need }}
{{- $admin := and (has $cap (list "BPF" "PERFMON")) (has "SYS_ADMIN" $have) }}
{{- if not (or (has $cap $have) $admin) }}
- WARNING: capabilities lacks {{ $cap }}: the agent runs without {{ $loses }}.
{{- end }}
{{- end }}
{{- end }}
{{- with $c.seccompProfile }}
{{- if ne (toString .type) "Unconfined" }}
- WARNING: securityContext.seccompProfile.type {{ .type }}: the runtimes' profiles allow bpf(2) only with CAP_SYS_ADMIN, so the tracer and the datapath will not load; set Unconfined (as Cilium's agent runs). The agent runs without them and says so in its log and in neighwatch_tracer_program_loaded.
{{- end }}
{{- end }}
{{- with $c.appArmorProfile }}
{{- if ne (toString .type) "Unconfined" }}
- WARNING: securityContext.appArmorProfile.type {{ .type }}: on nodes that enforce AppArmor, the runtime's default profile may deny bpf(2), perf events and packet sockets, and the agent runs without what is denied (its log and neighwatch_tracer_program_loaded say what); set Unconfined.
{{- end }}
{{- end }}
{{- if not .Values.excludeVirtualNodes }}
- WARNING: excludeVirtualNodes is false: on virtual-kubelet and Fargate nodes the agent's pods never start.
{{- end }}
{{- end -}}

{{/*
A namespace that enforces Pod Security baseline or restricted refuses
every pod of the agent (host network, a hostPath, added capabilities):
Helm would install the DaemonSet and report success, and the DaemonSet
would create no pod, with the reason only in its events. Read through
the API server at install and upgrade (lookup finds nothing under helm
template, where nothing is checked); checkPodSecurity false skips it,
for a namespace the admission configuration exempts.
*/}}
{{- define "neighwatch.podSecurity" -}}
{{- if .Values.checkPodSecurity -}}
{{- $name := include "neighwatch.namespace" . -}}
{{- $labels := dict -}}
{{- with lookup "v1" "Namespace" "" $name -}}
{{- $labels = default dict .metadata.labels -}}
{{- end -}}
{{- $level := toString (default "" (get $labels "pod-security.kubernetes.io/enforce")) -}}
{{- if has $level (list "baseline" "restricted") -}}
{{- fail (printf "namespace %s enforces Pod Security %s, which refuses the agent's pods (host network, a hostPath, added capabilities): label it pod-security.kubernetes.io/enforce=privileged (kubectl label namespace %s pod-security.kubernetes.io/enforce=privileged --overwrite), or set checkPodSecurity false if the admission configuration exempts it" $name $level $name) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The agent's configuration file, as the ConfigMap holds it: config, with
the chart's interface exclusions (defaultExcludeInterfaces) before the
operator's own (config.exclude-interfaces), so that adding one keeps
the CNI's pod interfaces out.
*/}}
{{- define "neighwatch.agentConfig" -}}
{{- $c := deepCopy (default dict .Values.config) -}}
{{- $all := list -}}
{{- range concat (default list .Values.defaultExcludeInterfaces) (include "neighwatch.asList" (get $c "exclude-interfaces") | fromYamlArray) -}}
{{- $all = append $all (toString .) -}}
{{- end -}}
{{- $all = uniq $all -}}
{{- if $all -}}
{{- $_ := set $c "exclude-interfaces" $all -}}
{{- else -}}
{{- $_ := unset $c "exclude-interfaces" -}}
{{- end -}}
{{- toYaml $c -}}
{{- end -}}

{{/* A list value as a YAML list: a list as it is, a string split at commas (as the agent splits it), nothing for null. */}}
{{- define "neighwatch.asList" -}}
{{- if kindIs "slice" . -}}
{{- toYaml . -}}
{{- else if kindIs "invalid" . -}}
[]
{{- else -}}
{{- $out := list -}}
{{- range splitList "," (toString .) -}}
{{- if trim . }}{{ $out = append $out (trim .) }}{{ end -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}
{{- end -}}

{{/*
A value as the agent reads it from its file: a string as it is, a
number as Go prints it, a boolean as true or false ("" and an error for
what the agent refuses, in its words, as .err).
*/}}
{{- define "neighwatch.flagText" -}}
{{- $v := . -}}
{{- if kindIs "string" $v -}}{{- $v -}}
{{- else if kindIs "bool" $v -}}{{- ternary "true" "false" $v -}}
{{- else if or (kindIs "float64" $v) (kindIs "float32" $v) -}}
{{- if eq (float64 (int64 $v)) (float64 $v) -}}{{- printf "%d" (int64 $v) -}}{{- else -}}{{- printf "%v" $v -}}{{- end -}}
{{- else if or (kindIs "int" $v) (kindIs "int64" $v) (kindIs "uint64" $v) -}}{{- printf "%d" $v -}}
{{- else -}}{{- printf "%v" $v -}}
{{- end -}}
{{- end -}}

{{/*
A Go duration (time.ParseDuration's syntax) in nanoseconds, or "bad".
*/}}
{{- define "neighwatch.durationNs" -}}
{{- $s := toString . -}}
{{- $neg := hasPrefix "-" $s -}}
{{- $s = trimPrefix "+" (trimPrefix "-" $s) -}}
{{- if eq $s "0" -}}0
{{- else if regexMatch "^(([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$" $s -}}
{{- $units := dict "ns" 1.0 "us" 1000.0 "µs" 1000.0 "μs" 1000.0 "ms" 1000000.0 "s" 1000000000.0 "m" 60000000000.0 "h" 3600000000000.0 -}}
{{- $total := 0.0 -}}
{{- range regexFindAll "([0-9]+(\\.[0-9]*)?|\\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)" $s -1 -}}
{{- $num := regexFind "^([0-9]+(\\.[0-9]*)?|\\.[0-9]+)" . -}}
{{- $unit := trimPrefix $num . -}}
{{- $total = addf $total (mulf (float64 (printf "0%s" $num)) (get $units $unit)) -}}
{{- end -}}
{{- if $neg }}{{ $total = mulf $total -1.0 }}{{ end -}}
{{- printf "%f" $total -}}
{{- else -}}bad
{{- end -}}
{{- end -}}

{{/*
The agent's configuration, checked as the agent checks it at start
and on a reload (internal/options, generated into _options.tpl): each
key an option a file may set, each value of the option's kind, in its
range, of its words; the command line's flags (extraArgs) win, as they
do in the agent. A refusal is the agent's own line, after the key.
*/}}
{{- define "neighwatch.checkConfig" -}}
{{- $opts := include "neighwatch.agentOptions" . | fromJson -}}
{{- $cfg := include "neighwatch.agentConfig" . | fromYaml -}}
{{- range $k := list "metrics.listen" "config.file" -}}
{{- if hasKey $cfg $k -}}
{{- fail (printf "config.%s: the chart sets --%s on the agent's command line, which wins over the file: %s" $k $k (ternary "set port" "the chart mounts its ConfigMap there" (eq $k "metrics.listen"))) -}}
{{- end -}}
{{- end -}}
{{- $flags := dict -}}
{{- $args := default list $.Values.extraArgs -}}
{{- range $i, $a := $args -}}
{{- $name := regexReplaceAll "^--?([^=]+)(=.*)?$" (toString $a) "${1}" -}}
{{- if hasKey $opts $name -}}
{{- if contains "=" (toString $a) -}}
{{- $_ := set $flags $name (regexReplaceAll "^--?[^=]+=" (toString $a) "") -}}
{{- else if and (ne (get $opts $name).kind "bool") (lt (add1 $i) (len $args)) -}}
{{- $_ := set $flags $name (index $args (add1 $i)) -}}
{{- else -}}
{{- $_ := set $flags $name "true" -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if hasKey $flags "exclude-interfaces" -}}
{{- fail "extraArgs --exclude-interfaces: on the command line it replaces the file's list, the chart's defaultExcludeInterfaces (lxc.*, cali.*, veth.*, cilium_.*) with it, and the agent would watch every pod's interface; set config.exclude-interfaces, which adds to them" -}}
{{- end -}}
{{- $all := merge (deepCopy $flags) $cfg -}}
{{- $numbers := dict -}}
{{- with get $all "web.config.file" -}}
{{- $file := toString . -}}
{{- $in := false -}}
{{- range $.Values.extraVolumeMounts -}}
{{- if hasPrefix (printf "%s/" (trimSuffix "/" (toString .mountPath))) $file }}{{ $in = true }}{{ end -}}
{{- end -}}
{{- if not $in -}}
{{- fail (printf "config.web.config.file %s is in no volume of the pod: mount it (a Secret in extraVolumes, its mount in extraVolumeMounts) and name the file there; the agent reads it at start and refuses to run without it" $file) -}}
{{- end -}}
{{- end -}}
{{- range $k, $v := $all -}}
{{- $where := ternary (printf "extraArgs --%s" $k) (printf "config.%s" $k) (hasKey $flags $k) -}}
{{- if not (hasKey $opts $k) -}}
{{- $hint := "" -}}
{{- $plain := lower (regexReplaceAll "[^a-zA-Z0-9]" $k "") -}}
{{- range $name, $_ := $opts -}}
{{- if eq $plain (lower (regexReplaceAll "[^a-zA-Z0-9]" $name "")) }}{{ $hint = printf ": did you mean %s?" $name }}{{ end -}}
{{- end -}}
{{- fail (printf "config: unknown key %q (keys are the agent command's flag names without dashes, as in its --help and the flag table of docs/running.md)%s" $k $hint) -}}
{{- end -}}
{{- $o := get $opts $k -}}
{{- if kindIs "invalid" $v -}}
{{- fail (printf "%s: no value (remove the key for the default)" $where) -}}
{{- end -}}
{{- if kindIs "map" $v -}}
{{- fail (printf "%s: want a string, number, bool or list, got a map" $where) -}}
{{- end -}}
{{- if and (kindIs "bool" $v) (eq $o.kind "words") -}}
{{- $v = ternary "on" "off" $v -}}
{{- end -}}
{{- $text := "" -}}
{{- if kindIs "slice" $v -}}
{{- $parts := list -}}
{{- range $v -}}
{{- if kindIs "slice" . }}{{ fail (printf "%s: a list inside a list" $where) }}{{ end -}}
{{- $parts = append $parts (include "neighwatch.flagText" .) -}}
{{- end -}}
{{- $text = join "," $parts -}}
{{- else -}}
{{- $text = include "neighwatch.flagText" $v -}}
{{- end -}}
{{- $refused := replace "@@VALUE@@" $text (default "" $o.refused) -}}
{{- if has $o.kind (list "int" "float" "duration") -}}
{{- $n := 0.0 -}}
{{- if eq $o.kind "duration" -}}
{{- $ns := include "neighwatch.durationNs" $text -}}
{{- if eq $ns "bad" }}{{ fail (printf "%s: %s" $where $refused) }}{{ end -}}
{{- $n = float64 $ns -}}
{{- else if eq $o.kind "int" -}}
{{- if not (regexMatch "^[-+]?[0-9]+$" $text) }}{{ fail (printf "%s: %s" $where $refused) }}{{ end -}}
{{- $n = float64 (trimPrefix "+" $text) -}}
{{- else -}}
{{- if not (regexMatch "^[-+]?([0-9]+\\.?[0-9]*|\\.[0-9]+)([eE][-+]?[0-9]+)?$" $text) -}}
{{- if regexMatch "^[-+]?(?i:nan|inf|infinity)$" $text -}}
{{- fail (printf "%s: %s is out of range: want a number from %s" $where $text $o.range) -}}
{{- end -}}
{{- fail (printf "%s: %s" $where $refused) -}}
{{- end -}}
{{- $n = float64 (trimPrefix "+" $text) -}}
{{- end -}}
{{- $_ := set $numbers $k (dict "n" $n "text" $text "where" $where) -}}
{{- else if eq $o.kind "bool" -}}
{{- if not (has $text (list "1" "t" "T" "TRUE" "true" "True" "0" "f" "F" "FALSE" "false" "False")) -}}
{{- fail (printf "%s: %s" $where $refused) -}}
{{- end -}}
{{- else if eq $o.kind "words" -}}
{{- if not (has $text $o.words) -}}
{{- fail (printf "%s: %s" $where (default (printf "%q: want %s" $text (join ", " $o.words)) $refused)) -}}
{{- end -}}
{{- else if has $o.kind (list "list" "regexes" "prefixes") -}}
{{- $items := include "neighwatch.asList" $text | fromYamlArray -}}
{{- if and $o.words (not $items) -}}
{{- fail (printf "%s: no remediation strategy in %q" $where $text) -}}
{{- end -}}
{{- if and (eq $o.kind "regexes") (gt (len $items) 256) -}}
{{- fail (printf "%s: %d interface regexes, more than 256: join them into fewer (lxc.*|veth.*)" $where (len $items)) -}}
{{- end -}}
{{- $seen := dict -}}
{{- range $items -}}
{{- $item := toString . -}}
{{- if and $o.words (not (has $item $o.words)) -}}
{{- fail (printf "%s: %s" $where (replace "@@VALUE@@" $item $o.element)) -}}
{{- end -}}
{{- if and $o.words (hasKey $seen $item) -}}
{{- fail (printf "%s: remediation strategy %q listed twice" $where $item) -}}
{{- end -}}
{{- $_ := set $seen $item true -}}
{{- if eq $o.kind "regexes" -}}
{{- if gt (len $item) 1024 -}}
{{- fail (printf "%s: an interface regex of %d bytes, more than 1024: interface names are at most 15" $where (len $item)) -}}
{{- end -}}
{{- /* An invalid regex matches nothing; a valid one wrapped so matches "". */ -}}
{{- if not (regexMatch (printf "(?:^(?:%s)$)|^$" $item) "") -}}
{{- fail (printf "%s: bad interface regex %q: not a regular expression of Go's syntax (RE2), anchored to the whole name" $where $item) -}}
{{- end -}}
{{- end -}}
{{- if and (eq $o.kind "prefixes") (not (include "neighwatch.isPrefix" $item)) -}}
{{- fail (printf "%s: %s" $where (replace "@@VALUE@@" $item $o.element)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- /* Ranges, in the order the agent checks them, the period against the window first. */ -}}
{{- range $k := include "neighwatch.agentOptionOrder" . | fromJsonArray -}}
{{- if and (eq $k "tracer.period") -}}
{{- $w := get $numbers "tracer.window" | default (dict "n" 1000000000.0 "text" "1s") -}}
{{- $p := get $numbers "tracer.period" | default (dict "n" 30000000000.0 "text" "30s") -}}
{{- if lt (float64 $p.n) (float64 $w.n) -}}
{{- fail (printf "config.tracer.period: %s is shorter than --tracer.window %s: the per-packet hooks are attached for the window out of every period; set the period at least the window" $p.text $w.text) -}}
{{- end -}}
{{- end -}}
{{- with get $numbers $k -}}
{{- $o := get $opts $k -}}
{{- $lo := float64 (default 0 $o.lo) -}}
{{- $hi := float64 (default 0 $o.hi) -}}
{{- if eq $o.kind "duration" }}{{ $lo = mulf $lo 1000000000.0 }}{{ $hi = mulf $hi 1000000000.0 }}{{ end -}}
{{- if and (or (lt (float64 .n) $lo) (gt (float64 .n) $hi)) (not (and $o.zeroOff (eq (float64 .n) 0.0))) -}}
{{- fail (printf "%s: %s is out of range: want %s" .where .text $o.range) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- /* What the agent checks across options. */ -}}
{{- $mode := include "neighwatch.flagText" (default "dry-run" (get $all "remediation")) -}}
{{- if kindIs "bool" (get $all "remediation") }}{{ $mode = ternary "on" "off" (get $all "remediation") }}{{ end -}}
{{- $strategies := include "neighwatch.asList" (get $all "remediation.strategies") | fromYamlArray -}}
{{- if and (ne $mode "off") $strategies (eq (join "," $strategies) "swap") (ne (include "neighwatch.flagText" (default "legacy" (get $all "datapath.mode"))) "auto") -}}
{{- fail "config.remediation.strategies swap can never act: swap never acts: it needs a datapath that may swap (the agent's auto datapath mode): set datapath.mode auto, or add probe" -}}
{{- end -}}
{{- end -}}

{{/* Whether a text is a prefix in CIDR notation, as Go's netip.ParsePrefix takes it ("true" or ""). */}}
{{- define "neighwatch.isPrefix" -}}
{{- $octet := "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])" -}}
{{- $v4 := printf "%s(\\.%s){3}" $octet $octet -}}
{{- $h := "[0-9a-fA-F]{1,4}" -}}
{{- $v6 := printf "((%[1]s:){7}%[1]s|(%[1]s:){1,7}:|(%[1]s:){1,6}:%[1]s|(%[1]s:){1,5}(:%[1]s){1,2}|(%[1]s:){1,4}(:%[1]s){1,3}|(%[1]s:){1,3}(:%[1]s){1,4}|(%[1]s:){1,2}(:%[1]s){1,5}|%[1]s:(:%[1]s){1,6}|:((:%[1]s){1,7}|:)|(%[1]s:){6}%[2]s|(%[1]s:){1,5}:%[2]s|::((%[1]s:){0,5})?%[2]s|(%[1]s:){1,4}:(%[1]s:){0,3}%[2]s|(%[1]s:){1,3}:(%[1]s:){0,4}%[2]s|(%[1]s:){1,2}:(%[1]s:){0,5}%[2]s|%[1]s::(%[1]s:){0,6}%[2]s)" $h $v4 -}}
{{- if regexMatch (printf "^%s/(3[0-2]|[12]?[0-9])$" $v4) . -}}true
{{- else if regexMatch (printf "^%s/(12[0-8]|1[01][0-9]|[1-9]?[0-9])$" $v6) . -}}true
{{- end -}}
{{- end -}}

{{/*
A Kubernetes quantity ("64Mi", "0.5", "100m", "1G") as a number, or
"bad".
*/}}
{{- define "neighwatch.quantity" -}}
{{- $s := toString . -}}
{{- if regexMatch "^([0-9]+\\.?[0-9]*|\\.[0-9]+)([eE][-+]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$" $s -}}
{{- $units := dict "" 1.0 "n" 0.000000001 "u" 0.000001 "m" 0.001 "k" 1000.0 "M" 1000000.0 "G" 1000000000.0 "T" 1000000000000.0
  "P" 1000000000000000.0 "E" 1000000000000000000.0 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0
  "Pi" 1125899906842624.0 "Ei" 1152921504606846976.0 -}}
{{- $num := regexFind "^([0-9]+\\.?[0-9]*|\\.[0-9]+)([eE][-+]?[0-9]+)?" $s -}}
{{- $suffix := trimPrefix $num $s -}}
{{- printf "%f" (mulf (float64 (printf "0%s" $num)) (get $units $suffix)) -}}
{{- else -}}bad
{{- end -}}
{{- end -}}

{{/*
What the API server or the kubelet would refuse in the DaemonSet this
chart renders from the values, refused here first with the value to set:
resources, the update strategy's IntOrStrings and surge, mounts and
volumes beside the chart's own, image references, probes, the AppArmor
annotation beside the field.
*/}}
{{- define "neighwatch.admissible" -}}
{{- $r := default dict .Values.resources -}}
{{- $req := default dict $r.requests -}}
{{- $lim := default dict $r.limits -}}
{{- range $what, $m := dict "requests" $req "limits" $lim -}}
{{- range $res, $q := $m -}}
{{- if eq (include "neighwatch.quantity" $q) "bad" -}}
{{- fail (printf "resources.%s.%s %v is not a Kubernetes quantity (such as 64Mi, 0.5 or 100m): the API server refuses it" $what $res $q) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range $res, $l := $lim -}}
{{- if hasKey $req $res -}}
{{- if gt (float64 (include "neighwatch.quantity" (get $req $res))) (float64 (include "neighwatch.quantity" $l)) -}}
{{- fail (printf "resources.limits.%s %v is below resources.requests.%s %v (the chart's default unless you set it): the API server refuses a request above its limit; set resources.requests.%s at most the limit" $res $l $res (get $req $res) $res) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $u := default dict .Values.updateStrategy -}}
{{- if and (ne (toString $u.type) "RollingUpdate") $u.rollingUpdate -}}
{{- fail (printf "updateStrategy.rollingUpdate is set with type %s: the API server refuses it; drop rollingUpdate, or set type RollingUpdate" $u.type) -}}
{{- end -}}
{{- $ru := default dict $u.rollingUpdate -}}
{{- range $k := list "maxUnavailable" "maxSurge" -}}
{{- $v := index $ru $k -}}
{{- if and (hasKey $ru $k) (kindIs "string" $v) (not (regexMatch "^[0-9]+%$" $v)) -}}
{{- fail (printf "updateStrategy.rollingUpdate.%s %q: the API server reads a string as a percentage and refuses this one; write %s unquoted (a count of nodes) or a percentage such as 10%%" $k $v $v) -}}
{{- end -}}
{{- end -}}
{{- with $ru.maxSurge -}}
{{- if ne (toString .) "0" -}}
{{- if ne (toString .) "0%" -}}
{{- fail (printf "updateStrategy.rollingUpdate.maxSurge %v: the agent runs on the host network, and a surge pod needs the port its old pod holds (%v), so it never starts and the rollout never ends; leave maxSurge out and set maxUnavailable" . $.Values.port) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and (hasKey $ru "maxUnavailable") (eq (toString $ru.maxUnavailable) "0") (eq (toString (default 0 $ru.maxSurge)) "0") -}}
{{- fail "updateStrategy.rollingUpdate.maxUnavailable 0 with no maxSurge: the API server refuses a rollout that may replace no pod; set maxUnavailable at least 1 (or a percentage)" -}}
{{- end -}}
{{- $own := dict "/etc/neighwatch" "config (the agent's ConfigMap)" "/run/neighwatch" "run (the control socket's hostPath)" -}}
{{- $seenMount := dict -}}
{{- range $i, $m := default list .Values.extraVolumeMounts -}}
{{- $p := trimSuffix "/" (toString $m.mountPath) -}}
{{- if hasKey $own $p -}}
{{- fail (printf "extraVolumeMounts[%d] mounts at %s, where the chart mounts %s, and the API server refuses two mounts at one path: mount elsewhere (for a web config, say /etc/neighwatch-web) and name the file in extraArgs" $i $p (get $own $p)) -}}
{{- end -}}
{{- if hasKey $seenMount $p -}}
{{- fail (printf "extraVolumeMounts[%d] mounts at %s, as an earlier one does: the API server refuses two mounts at one path" $i $p) -}}
{{- end -}}
{{- $_ := set $seenMount $p true -}}
{{- end -}}
{{- range $i, $v := default list .Values.extraVolumes -}}
{{- if has (toString $v.name) (list "config" "run") -}}
{{- fail (printf "extraVolumes[%d] is named %s, as a volume of the chart's: the API server refuses two volumes of one name; name it otherwise" $i $v.name) -}}
{{- end -}}
{{- range $k := list "mountPath" "readOnly" "subPath" -}}
{{- if hasKey $v $k -}}
{{- fail (printf "extraVolumes[%d] has %s, a field of a mount, not of a volume: put it in extraVolumeMounts ({name: %s, mountPath: ...}); the volume is {name: %s, hostPath: {path: ...}}" $i $k $v.name $v.name) -}}
{{- end -}}
{{- end -}}
{{- if and (hasKey $v "hostPath") (not (kindIs "map" $v.hostPath)) -}}
{{- fail (printf "extraVolumes[%d].hostPath %v: a hostPath volume is an object, {path: %v} (with type: Directory, say)" $i $v.hostPath $v.hostPath) -}}
{{- end -}}
{{- end -}}
{{- $repo := toString .Values.image.repository -}}
{{- $first := regexFind "^[^/]+" $repo -}}
{{- if and (contains "/" $repo) (or (contains "." $first) (contains ":" $first) (eq $first "localhost")) -}}
{{- fail (printf "image.repository %s starts with a registry (%s), and the chart puts image.registry before it: set image.registry: %s and image.repository: %s" $repo $first $first (trimPrefix (printf "%s/" $first) $repo)) -}}
{{- end -}}
{{- if or (contains "@" $repo) (contains ":" (trimPrefix $first $repo)) -}}
{{- fail (printf "image.repository %s holds a tag or a digest: set image.tag or image.digest" $repo) -}}
{{- end -}}
{{- $tag := toString (default "" .Values.image.tag) -}}
{{- if or (contains "@" $tag) (hasPrefix "sha256:" $tag) -}}
{{- fail (printf "image.tag %s holds a digest: set image.digest: %s (it wins over the tag) and leave the tag out" $tag (regexFind "sha256:.*$" $tag)) -}}
{{- end -}}
{{- if and $tag (not (regexMatch "^[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127}$" $tag)) -}}
{{- fail (printf "image.tag %q is not a tag the kubelet can pull (letters, digits, _ . -, at most 128, not starting with . or -)" $tag) -}}
{{- end -}}
{{- /* A null probe (Helm drops the key) keeps the chart's probe, with Kubernetes' timings. */ -}}
{{- range $p := list "readinessProbe" "livenessProbe" -}}
{{- if and (hasKey $.Values $p) (not (kindIs "map" (index $.Values $p))) -}}
{{- fail (printf "%s is %v: the agent's probes are the chart's (/readyz and /healthz); set their timings in %s (periodSeconds, failureThreshold...), or leave it out" $p (index $.Values $p) $p) -}}
{{- end -}}
{{- end -}}
{{- $sc := default dict .Values.securityContext -}}
{{- range $k, $v := default dict .Values.podAnnotations -}}
{{- if hasPrefix "container.apparmor.security.beta.kubernetes.io/" $k -}}
{{- $field := default dict $sc.appArmorProfile -}}
{{- $want := dict "unconfined" "Unconfined" "runtime/default" "RuntimeDefault" -}}
{{- if ne (toString (get $want (toString $v))) (toString $field.type) -}}
{{- fail (printf "podAnnotations %s: %s, beside securityContext.appArmorProfile.type %s, which the API server refuses when they differ (the annotation is deprecated since Kubernetes 1.30): set securityContext.appArmorProfile and drop the annotation" $k $v (default "unset" $field.type)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The keys of the agent's configuration that it applies only at a start
(the option table's restart keys), for the pod template's checksum: a
change of one of them rolls the DaemonSet, a change of a live one (the
remediation settings, the stale threshold) reaches the running agents
through the kubelet's volume and rolls nothing.
*/}}
{{- define "neighwatch.restartConfig" -}}
{{- $opts := include "neighwatch.agentOptions" . | fromJson -}}
{{- $out := dict -}}
{{- range $k, $v := include "neighwatch.agentConfig" . | fromYaml -}}
{{- if not (get (default dict (get $opts $k)) "live") -}}
{{- $_ := set $out $k $v -}}
{{- end -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/*
A key the chart does not have (values.schema.json's keys, generated into
_keys.tpl) is refused naming the one meant where it differs only in case
or punctuation (runbookUrl for runbookURL), or with what to do.
*/}}
{{- define "neighwatch.unknownKeys" -}}
{{- include "neighwatch.walkKeys" (dict "have" .Values "known" (include "neighwatch.valueKeys" . | fromJson) "path" "") -}}
{{- end -}}

{{- define "neighwatch.walkKeys" -}}
{{- $known := .known -}}
{{- $path := .path -}}
{{- range $k, $v := .have -}}
{{- $p := ternary $k (printf "%s.%s" $path $k) (eq $path "") -}}
{{- if not (hasKey $known $k) -}}
{{- $meant := "" -}}
{{- $plain := lower (regexReplaceAll "[^a-zA-Z0-9]" $k "") -}}
{{- range $name, $_ := $known -}}
{{- if eq $plain (lower (regexReplaceAll "[^a-zA-Z0-9]" $name "")) }}{{ $meant = $name }}{{ end -}}
{{- end -}}
{{- if $meant -}}
{{- fail (printf "%s is not a value of this chart: did you mean %s?" $p (ternary $meant (printf "%s.%s" $path $meant) (eq $path ""))) -}}
{{- end -}}
{{- if le (len $known) 16 -}}
{{- fail (printf "%s is not a value of this chart: %s holds %s (values.yaml says what each does)" $p (default "the chart" $path) (join ", " (keys $known | sortAlpha))) -}}
{{- end -}}
{{- fail (printf "%s is not a value of this chart: values.yaml lists them, each with what it does" $p) -}}
{{- else if and (kindIs "map" (get $known $k)) (kindIs "map" $v) -}}
{{- include "neighwatch.walkKeys" (dict "have" $v "known" (get $known $k) "path" $p) -}}
{{- end -}}
{{- end -}}
{{- end -}}
