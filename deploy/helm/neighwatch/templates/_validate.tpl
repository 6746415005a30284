{{/*
The values an operator brings from prometheus-community's node-exporter
chart or Cilium's that would render a broken agent, or one that runs
without what it needs, each refused with one line saying what to set
instead. daemonset.yaml includes it, so every render runs it.
*/}}
{{- define "neighwatch.validate" -}}
{{- include "neighwatch.foreignValues" . -}}
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
  "kubeRBACProxy" "the agent serves TLS and authentication itself: mount a web config and pass --web.config.file in extraArgs (README: Running)"
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
{{- range $k, $why := $advice }}
{{- if hasKey $.Values $k }}
{{- fail (printf "%s is not a value of this chart: %s" $k $why) }}
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
- WARNING: securityContext.seccompProfile.type {{ .type }}: the runtimes' profiles allow bpf(2) only with CAP_SYS_ADMIN, so the tracer and the datapath will not load; set Unconfined (as Cilium's agent runs).
{{- end }}
{{- end }}
{{- if not .Values.excludeVirtualNodes }}
- WARNING: excludeVirtualNodes is false: on virtual-kubelet and Fargate nodes the agent's pods never start.
{{- end }}
{{- end -}}
