//go:build cluster

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/neighwatch/neighwatch/bpf"
	"github.com/neighwatch/neighwatch/internal/control"
	"github.com/neighwatch/neighwatch/internal/dev/cluster"
	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"github.com/neighwatch/neighwatch/internal/dev/lab/fwd"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// operate is the operator's day with Helm 4: install, look, page,
// repair, edit, measure, roll, uninstall.
func (k *kube) operate(t *testing.T) {
	const ns = "neighwatch"
	k.namespace(t, ns, map[string]string{"pod-security.kubernetes.io/enforce": "privileged"})
	values := writeValues(t, clusterValues(t, ""))
	before := bpfPrograms(t)
	start := time.Now()
	if _, err := k.helmRun(t, "4", "install", "neighwatch", k.chart, "--version", k.version, "--plain-http", "-n", ns, "-f", values); err != nil {
		t.Fatal(err)
	}
	done := false
	t.Cleanup(func() {
		if !done {
			_, _ = k.helmRun(t, "4", "uninstall", "neighwatch", "-n", ns, "--wait")
		}
	})
	pod := k.waitReadyPod(t, ns, 3*time.Minute, "")
	k.figures.add(t, "helm 4 install to the pod Ready: %v", time.Since(start).Round(100*time.Millisecond))
	k.checkPod(t, ns, pod)
	hooks := k.monitor(t, ns)
	k.movedHost(t, ns, hooks)
	k.configEdits(t, ns, pod, hooks)
	k.memory(t)
	k.rollout(t, ns)
	k.uninstall(t, "4", ns, before)
	done = true
}

// installOnly installs with Helm version v into ns, checks the pod as
// operate does, and uninstalls.
func (k *kube) installOnly(t *testing.T, v, ns string) {
	k.namespace(t, ns, map[string]string{"pod-security.kubernetes.io/enforce": "privileged"})
	values := writeValues(t, clusterValues(t, ""))
	before := bpfPrograms(t)
	start := time.Now()
	if _, err := k.helmRun(t, v, "install", "neighwatch", k.chart, "--version", k.version, "--plain-http", "-n", ns, "-f", values); err != nil {
		t.Fatal(err)
	}
	done := false
	t.Cleanup(func() {
		if !done {
			_, _ = k.helmRun(t, v, "uninstall", "neighwatch", "-n", ns, "--wait")
		}
	})
	pod := k.waitReadyPod(t, ns, 3*time.Minute, "")
	k.figures.add(t, "helm %s install to the pod Ready: %v", v, time.Since(start).Round(100*time.Millisecond))
	k.checkPod(t, ns, pod)
	body := k.scrape(t)
	if !strings.Contains(body, "neighwatch_build_info{") {
		t.Errorf("the agent's metrics on the node's address lack neighwatch_build_info:\n%.2000s", body)
	}
	k.uninstall(t, v, ns, before)
	done = true
}

// scrape reads the agent's metrics at the node's address, as Prometheus
// does (the pod is on the host network).
func (k *kube) scrape(t *testing.T) string {
	t.Helper()
	code, body, err := httpGet("http://" + net.JoinHostPort(k.node.NodeIP().String(), "9947") + "/metrics")
	if err != nil || code != http.StatusOK {
		t.Fatalf("scrape the agent at the node's address: %d %v", code, err)
	}
	return body
}

func httpGet(url string) (int, string, error) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// checkPod: the pod is the DaemonSet's, on the host network; the agent
// holds exactly the capabilities its securityContext adds, no more,
// under the seccomp and privilege settings it asks for, on a read-only
// root; its tracer counts bypass traffic in the mode this kernel allows;
// its control socket is on the node's hostPath, mode 0600.
func (k *kube) checkPod(t *testing.T, ns string, pod corev1.Pod) {
	t.Helper()
	var ds appsv1.DaemonSet
	k.getJSON(t, &ds, "daemonset", "-n", ns, "neighwatch")
	if !pod.Spec.HostNetwork || pod.Status.PodIP != k.node.NodeIP().String() {
		t.Errorf("the pod is not on the host network: hostNetwork %v, IP %s (the node's %s)", pod.Spec.HostNetwork, pod.Status.PodIP, k.node.NodeIP())
	}
	sc := ds.Spec.Template.Spec.Containers[0].SecurityContext
	var want []string
	for _, c := range sc.Capabilities.Add {
		want = append(want, string(c))
	}
	slices.Sort(want)
	pid := k.agentPID(t)
	for _, set := range []string{"CapEff", "CapPrm", "CapBnd"} {
		got := capSet(t, pid, set)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("the agent's %s is %v; the chart adds %v (and drops ALL)", set, got, want)
		}
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"NoNewPrivs:\t1", "Seccomp:\t0"} {
		// allowPrivilegeEscalation false; seccomp Unconfined (the
		// runtime's default profile refuses bpf(2) without SYS_ADMIN).
		if !strings.Contains(string(status), line+"\n") {
			t.Errorf("/proc/%d/status lacks %q", pid, line)
		}
	}
	if mi, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid)); err != nil || !rootReadOnly(string(mi)) {
		t.Errorf("the agent's root file system is not read-only (%v)", err)
	}
	var tst control.TracerStatus
	if err := k.agentCLI(t, &tst, "tracer"); err != nil {
		t.Fatalf("the control socket on the node's hostPath: %v", err)
	}
	// The NOTES' way: kubectl exec into the DaemonSet's pod.
	if out, err := k.kubectl(nil, "exec", "-n", ns, "ds/neighwatch", "--", "neighwatch", "status"); err != nil || !strings.Contains(string(out), lab.NodeClientIf) {
		t.Errorf("kubectl exec ds/neighwatch -- neighwatch status (the NOTES' command): %v\n%s", err, out)
	}
	wantMode := "xmit"
	if ok, _ := bpf.FentryAllowed(); ok {
		wantMode = "fentry"
	}
	if !tst.Running || tst.Mode != wantMode {
		t.Errorf("the tracer in the pod: running %v, mode %q; this kernel allows %s", tst.Running, tst.Mode, wantMode)
	}
	fi, err := os.Lstat(k.sock())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Errorf("the control socket on the hostPath: %v, want a socket of mode 0600", fi.Mode())
	}
	t.Logf("pod %s: capabilities %v, tracer %s, socket %s", pod.Name, want, tst.Mode, fi.Mode())
}

// rootReadOnly reports whether the mount at / in a mountinfo is
// read-only.
func rootReadOnly(mountinfo string) bool {
	for _, l := range strings.Split(mountinfo, "\n") {
		f := strings.Fields(l)
		if len(f) > 5 && f[4] == "/" {
			return slices.Contains(strings.Split(f[5], ","), "ro")
		}
	}
	return false
}

// monitor runs Prometheus and Alertmanager on the node's network (as a
// host-network monitoring pod would): Prometheus discovers the agent
// through the API server with the scrape configuration the chart's
// PodMonitor stands for, and loads the rules of its PrometheusRule, both
// read back from the API server. prometheus-operator itself is not run:
// the translation below is what it would write for them.
func (k *kube) monitor(t *testing.T, ns string) *hookLog {
	t.Helper()
	var pm monitoringv1.PodMonitor
	k.getJSON(t, &pm, "podmonitor", "-n", ns, "neighwatch")
	var pr monitoringv1.PrometheusRule
	k.getJSON(t, &pr, "prometheusrule", "-n", ns, "neighwatch")
	rules, err := yaml.Marshal(map[string]any{"groups": pr.Spec.Groups})
	if err != nil {
		t.Fatal(err)
	}
	pki := k.node.PKI()
	sd := fmt.Sprintf("api_server: %s\ntls_config: {ca_file: %s, cert_file: %s, key_file: %s}\n", k.node.Server(),
		filepath.Join(pki, "ca.crt"), filepath.Join(pki, "admin.crt"), filepath.Join(pki, "admin.key"))
	scrape := podMonitorScrape(t, pm, sd)
	route, err := os.ReadFile("../deploy/prometheus/alertmanager-route.yml")
	if err != nil {
		t.Fatal(err)
	}
	inhibit, err := os.ReadFile("../deploy/prometheus/alertmanager-inhibit.yml")
	if err != nil {
		t.Fatal(err)
	}
	hooks := startAlertingWith(t, k.Node, rules, alerting{forDivisor: -1, prometheus: k.tools.Prometheus, scrape: scrape, scraped: 1,
		routes: string(route), inhibit: string(inhibit)})
	r, err := promQuery(k.Node, `up{job="neighwatch"}`)
	if err != nil || len(r) != 1 {
		t.Fatalf("up{job=\"neighwatch\"}: %v %v", r, err)
	}
	labels, _ := r[0]["metric"].(map[string]any)
	if labels["instance"] != "nwk8s-node" || labels["namespace"] != ns || labels["pod"] == nil {
		t.Errorf("the discovered target's labels %v: want instance the node's name (the chart's relabeling), the namespace and the pod", labels)
	}
	t.Logf("Prometheus %s scrapes the agent through Kubernetes service discovery: %v", filepath.Base(k.tools.Prometheus), labels)
	return hooks
}

// relabel is a Prometheus relabel_config.
type relabel struct {
	SourceLabels []string `json:"source_labels,omitempty"`
	Separator    *string  `json:"separator,omitempty"`
	TargetLabel  string   `json:"target_label,omitempty"`
	Regex        string   `json:"regex,omitempty"`
	Modulus      int64    `json:"modulus,omitempty"`
	Replacement  *string  `json:"replacement,omitempty"`
	Action       string   `json:"action,omitempty"`
}

func relabels(rs []monitoringv1.RelabelConfig) []relabel {
	var out []relabel
	for _, r := range rs {
		var src []string
		for _, s := range r.SourceLabels {
			src = append(src, string(s))
		}
		out = append(out, relabel{SourceLabels: src, Separator: r.Separator, TargetLabel: r.TargetLabel, Regex: r.Regex,
			Modulus: r.Modulus, Replacement: r.Replacement, Action: strings.ToLower(r.Action)})
	}
	return out
}

// sanitize turns a label name into the name service discovery gives it.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, s)
}

// podMonitorScrape writes the scrape configuration prometheus-operator
// makes of a PodMonitor (its pod role, label and port selection, its
// namespace, pod, container and job labels, then the monitor's own
// relabelings), for the fields the chart renders; any other field of
// an endpoint fails the test, so that the translation never drops one
// silently.
func podMonitorScrape(t *testing.T, pm monitoringv1.PodMonitor, sd string) string {
	t.Helper()
	if len(pm.Spec.Selector.MatchExpressions) > 0 {
		t.Fatalf("PodMonitor selector with matchExpressions: teach podMonitorScrape")
	}
	known := []string{"port", "path", "interval", "scrapeTimeout", "honorLabels", "relabelings", "metricRelabelings", "scheme"}
	var out []map[string]any
	for i, ep := range pm.Spec.PodMetricsEndpoints {
		raw, _ := json.Marshal(ep)
		var fields map[string]any
		_ = json.Unmarshal(raw, &fields)
		for f := range fields {
			if !slices.Contains(known, f) {
				t.Fatalf("PodMonitor endpoint field %s: teach podMonitorScrape", f)
			}
		}
		var rl []relabel
		rl = append(rl, relabel{SourceLabels: []string{"job"}, TargetLabel: "__tmp_prometheus_job_name"})
		for _, key := range slices.Sorted(func(yield func(string) bool) {
			for k := range pm.Spec.Selector.MatchLabels {
				if !yield(k) {
					return
				}
			}
		}) {
			rl = append(rl, relabel{SourceLabels: []string{"__meta_kubernetes_pod_label_" + sanitize(key), "__meta_kubernetes_pod_labelpresent_" + sanitize(key)},
				Regex: "(" + pm.Spec.Selector.MatchLabels[key] + ");true", Action: "keep"})
		}
		port := ""
		if ep.Port != nil {
			port = *ep.Port
		}
		rl = append(rl, relabel{SourceLabels: []string{"__meta_kubernetes_pod_container_port_name"}, Regex: port, Action: "keep"})
		for _, m := range []struct{ from, to string }{{"__meta_kubernetes_namespace", "namespace"}, {"__meta_kubernetes_pod_container_name", "container"},
			{"__meta_kubernetes_pod_name", "pod"}} {
			rl = append(rl, relabel{SourceLabels: []string{m.from}, TargetLabel: m.to})
		}
		job, endpoint := pm.Namespace+"/"+pm.Name, port
		rl = append(rl, relabel{TargetLabel: "job", Replacement: &job}, relabel{TargetLabel: "endpoint", Replacement: &endpoint})
		rl = append(rl, relabels(ep.RelabelConfigs)...)
		var sdc map[string]any
		if err := yaml.Unmarshal([]byte(sd), &sdc); err != nil {
			t.Fatal(err)
		}
		sdc["role"] = "pod"
		sdc["namespaces"] = map[string]any{"names": []string{pm.Namespace}}
		c := map[string]any{"job_name": fmt.Sprintf("podMonitor/%s/%s/%d", pm.Namespace, pm.Name, i), "kubernetes_sd_configs": []any{sdc},
			"relabel_configs": rl, "honor_labels": ep.HonorLabels}
		if ep.Interval != "" {
			c["scrape_interval"] = string(ep.Interval)
		}
		if ep.ScrapeTimeout != "" {
			c["scrape_timeout"] = string(ep.ScrapeTimeout)
		}
		if ep.Path != "" {
			c["metrics_path"] = ep.Path
		}
		if ep.Scheme != nil {
			c["scheme"] = strings.ToLower(string(*ep.Scheme))
		}
		if len(ep.MetricRelabelConfigs) > 0 {
			c["metric_relabel_configs"] = relabels(ep.MetricRelabelConfigs)
		}
		out = append(out, c)
	}
	b, err := yaml.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	// As items of scrape_configs.
	return indent(string(b), "  ")
}

// movedHost: the client moves to a new MAC behind a TC forwarder that
// bypasses the neighbour subsystem; its entry is found stuck, the page
// arrives through Alertmanager, and remediation switched on through the
// chart's values (helm upgrade: the ConfigMap, the kubelet's volume, the
// agent's reload) brings the traffic back.
func (k *kube) movedHost(t *testing.T, ns string, hooks *hookLog) {
	t.Helper()
	var f *fwd.Forwarder
	if err := k.Node.Do(func() (err error) { f, err = fwd.Attach(lab.NodeBackendIf, fwd.TC); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if sent, got, err := k.Client.Echo(k.backend, 10, 50*time.Millisecond, lab.Patience(time.Second)); err != nil || got != sent {
		t.Fatalf("the healthy client: %d of %d answered (%v)", got, sent, err)
	}
	ip := k.ip.String()
	entry := func() control.Entry {
		e, ok := findEntry(k.entries(t), lab.NodeClientIf, ip)
		if !ok {
			t.Fatalf("the agent has no entry for %s", ip)
		}
		return e
	}
	if e := entry(); e.Class == "stuck" {
		t.Fatalf("the healthy client is stuck: %+v", e)
	}
	k.move(t)
	moved := time.Now()
	for {
		if entry().Class == "stuck" {
			break
		}
		if time.Since(moved) > lab.Patience(60*time.Second) {
			t.Fatalf("not stuck %v after the move: %+v", time.Since(moved), entry())
		}
		if _, got, _ := k.Client.Echo(k.backend, 1, 0, 300*time.Millisecond); got != 0 {
			t.Fatalf("a reply reached the moved client through the stale MAC: the failure does not reproduce")
		}
	}
	stuck := time.Since(moved)
	lab.WaitFor(t, 3*time.Minute, "NeighbourEntryStuck for "+ip+" through Alertmanager", func() bool {
		_ = k.Client.Ping(k.backend, 1, 100*time.Millisecond)
		_, ok := hooks.find("NeighbourEntryStuck", "firing", map[string]string{"ip": ip, "instance": "nwk8s-node"})
		return ok
	})
	paged, _ := hooks.find("NeighbourEntryStuck", "firing", map[string]string{"ip": ip})
	k.figures.add(t, "moved host: stuck %v after the move, paged %v after it", stuck.Round(100*time.Millisecond), paged.Sub(moved).Round(100*time.Millisecond))

	upgraded := time.Now()
	if _, err := k.helmRun(t, "4", "upgrade", "neighwatch", k.chart, "--version", k.version, "--plain-http", "-n", ns,
		"--reuse-values", "--set", "config.remediation=on"); err != nil {
		t.Fatal(err)
	}
	applied := k.waitMode(t, "on", 3*time.Minute)
	back := k.waitTraffic(t, lab.Patience(60*time.Second))
	k.figures.add(t, "remediation on through values: in force %v after helm upgrade (the kubelet's sync), traffic back %v after that",
		applied.Sub(upgraded).Round(time.Second), back.Round(100*time.Millisecond))
	if e := entry(); e.Class == "stuck" || e.LLAddr != k.newMAC.String() {
		t.Errorf("after the repair the entry is %+v; want it at %s, not stuck", e, k.newMAC)
	}
	// Resolved in Prometheus within a scrape and an evaluation (the
	// route's group_interval of 5 m delays the resolved notification).
	lab.WaitFor(t, 90*time.Second, "NeighbourEntryStuck resolved in Prometheus", func() bool {
		r, err := promQuery(k.Node, `ALERTS{alertname="NeighbourEntryStuck",ip="`+ip+`"}`)
		return err == nil && len(r) == 0
	})
}

// waitMode waits for the agent's remediation mode to be mode, set by the
// configuration file, within limit (the kubelet's sync of the
// ConfigMap's volume and the agent's look at its file), and returns
// when it saw it.
func (k *kube) waitMode(t *testing.T, mode string, limit time.Duration) time.Time {
	t.Helper()
	lab.WaitFor(t, limit, "the agent's remediation mode "+mode+" from the file", func() bool {
		st, err := k.remediation(t)
		return err == nil && st.Mode == mode && st.ModeSource == "file"
	})
	return time.Now()
}

// agentLog is one line of the agent's JSON log.
type agentLog map[string]any

// logLines reads the agent's log through the API server, as an operator
// does (kubectl logs), from since.
func (k *kube) logLines(t *testing.T, ns, pod string, since time.Time) []agentLog {
	t.Helper()
	out := k.mustKubectl(t, nil, "logs", "-n", ns, pod, "--since-time", since.UTC().Format(time.RFC3339))
	var lines []agentLog
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l agentLog
		if json.Unmarshal(sc.Bytes(), &l) == nil {
			lines = append(lines, l)
		}
	}
	return lines
}

// patchConfig replaces the ConfigMap's config.yaml with body, as an
// operator editing it by hand.
func (k *kube) patchConfig(t *testing.T, ns string, cfg map[string]any) {
	t.Helper()
	body, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	patch, err := json.Marshal(map[string]any{"data": map[string]string{"config.yaml": string(body)}})
	if err != nil {
		t.Fatal(err)
	}
	k.mustKubectl(t, nil, "patch", "configmap", "-n", ns, "neighwatch-config", "--type", "merge", "-p", string(patch))
}

func (k *kube) config(t *testing.T, ns string) map[string]any {
	t.Helper()
	var cm corev1.ConfigMap
	k.getJSON(t, &cm, "configmap", "-n", ns, "neighwatch-config")
	cfg := map[string]any{}
	if err := yaml.Unmarshal([]byte(cm.Data["config.yaml"]), &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// configEdits: ConfigMap edits made by hand reach the running agent
// through the kubelet's projected volume (its ..data swap) with no
// restart: remediation off and a new stale threshold, then a bad edit,
// which the agent refuses, keeping what runs, saying so in its log and
// its metric, and paging through the mixin's alert; then the fix.
func (k *kube) configEdits(t *testing.T, ns string, pod corev1.Pod, hooks *hookLog) {
	t.Helper()
	cfg := k.config(t, ns)
	cfg["remediation"], cfg["stale-threshold"] = "off", "7s"
	edited := time.Now()
	k.patchConfig(t, ns, cfg)
	applied := k.waitMode(t, "off", 3*time.Minute)
	var reloaded agentLog
	lab.WaitFor(t, 30*time.Second, "the agent's log line of the reload", func() bool {
		for _, l := range k.logLines(t, ns, pod.Name, edited.Add(-time.Second)) {
			if l["msg"] == "configuration reloaded" {
				reloaded = l
				return true
			}
		}
		return false
	})
	if reloaded["stale_threshold"] != "7s" {
		t.Errorf("the reload's log line %v: want the stale threshold 7s in force", reloaded)
	}
	k.figures.add(t, "ConfigMap edit by hand (remediation off, threshold 7s): in force %v after the edit", applied.Sub(edited).Round(time.Second))

	bad := map[string]any{}
	for key, v := range cfg {
		bad[key] = v
	}
	bad["stale-threshold"] = "0s"
	edited = time.Now()
	k.patchConfig(t, ns, bad)
	var refused agentLog
	lab.WaitFor(t, 3*time.Minute, "the agent's log line refusing the bad edit", func() bool {
		for _, l := range k.logLines(t, ns, pod.Name, edited.Add(-time.Second)) {
			if msg, _ := l["msg"].(string); strings.HasPrefix(msg, "configuration reload failed, keeping the running configuration") {
				refused = l
				return true
			}
		}
		return false
	})
	if msg, _ := refused["msg"].(string); !strings.Contains(msg, "stale-threshold") {
		t.Errorf("the refusal does not name the setting: %v", refused)
	}
	if v := metricValue(k.scrape(t), "neighwatch_config_last_reload_successful"); v != "0" {
		t.Errorf("neighwatch_config_last_reload_successful = %q after a refused edit, want 0", v)
	}
	lab.WaitFor(t, 2*time.Minute, "NeighwatchConfigReloadFailed through Alertmanager", func() bool {
		_, ok := hooks.find("NeighwatchConfigReloadFailed", "firing", map[string]string{"instance": "nwk8s-node"})
		return ok
	})
	paged, _ := hooks.find("NeighwatchConfigReloadFailed", "firing", map[string]string{"instance": "nwk8s-node"})
	if st, err := k.remediation(t); err != nil || st.Mode != "off" {
		t.Errorf("after the refused edit the agent runs remediation %q (%v), want what ran: off", st.Mode, err)
	}
	k.figures.add(t, "bad ConfigMap edit (stale-threshold 0s): refused in the log %v after the edit, paged %v after it",
		refusedAt(refused).Sub(edited).Round(time.Second), paged.Sub(edited).Round(time.Second))

	// On again, and at-risk entries too: the manage strategy keeps the
	// entries that bypassing traffic reaches managed, which the rollout
	// below must see released.
	cfg["remediation"], cfg["stale-threshold"], cfg["remediation.scope"] = "on", "5s", "at-risk"
	k.patchConfig(t, ns, cfg)
	k.waitMode(t, "on", 3*time.Minute)
	lab.WaitFor(t, 30*time.Second, "neighwatch_config_last_reload_successful 1", func() bool {
		return metricValue(k.scrape(t), "neighwatch_config_last_reload_successful") == "1"
	})
	now := k.agentPods(t, ns)
	if len(now) != 1 || now[0].UID != pod.UID || now[0].Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("the edits restarted the agent: %v", podSummary(now))
	}
	// The same bad setting through the chart: helm upgrade refuses it in
	// the agent's words, and the release stays as it was.
	var before struct{ Version int }
	if err := json.Unmarshal(k.mustHelmJSON(t, "status", "neighwatch", "-n", ns, "-o", "json"), &before); err != nil {
		t.Fatal(err)
	}
	out, err := k.helmRun(t, "4", "upgrade", "neighwatch", k.chart, "--version", k.version, "--plain-http", "-n", ns,
		"--reuse-values", "--set", "config.stale-threshold=0s")
	if want := "config.stale-threshold: 0s is out of range: want 1s to 24h"; err == nil || !strings.Contains(string(out), want) {
		t.Errorf("helm upgrade with a stale threshold of 0s: %v, want it refused with %q\n%s", err, want, out)
	}
	var after struct{ Version int }
	if err := json.Unmarshal(k.mustHelmJSON(t, "status", "neighwatch", "-n", ns, "-o", "json"), &after); err != nil {
		t.Fatal(err)
	}
	if after.Version != before.Version {
		t.Errorf("the refused upgrade made revision %d of the release (was %d)", after.Version, before.Version)
	}
}

// mustHelmJSON runs helm 4 and returns its standard output.
func (k *kube) mustHelmJSON(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(k.helm["4"], append([]string{"--kubeconfig", k.node.Kubeconfig()}, args...)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func refusedAt(l agentLog) time.Time {
	s, _ := l["time"].(string)
	at, _ := time.Parse(time.RFC3339Nano, s)
	return at
}

// cgroupMemory reads the pod's memory: its working set (usage less the
// inactive file cache, as the kubelet counts it) and the peak usage, in
// bytes, from the pod's cgroup (v1).
func cgroupMemory(t *testing.T, dir string) (working, peak uint64) {
	t.Helper()
	read := func(f string) uint64 {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	usage := read("memory.usage_in_bytes")
	stat, err := os.ReadFile(filepath.Join(dir, "memory.stat"))
	if err != nil {
		t.Fatal(err)
	}
	var inactive uint64
	for _, l := range strings.Split(string(stat), "\n") {
		if v, ok := strings.CutPrefix(l, "total_inactive_file "); ok {
			inactive, _ = strconv.ParseUint(v, 10, 64)
		}
	}
	return usage - min(inactive, usage), read("memory.max_usage_in_bytes")
}

// podCgroup is the agent's pod's cgroup directory in hierarchy (memory,
// cpuacct).
func (k *kube) podCgroup(t *testing.T, hierarchy string) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", k.agentPID(t)))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) == 3 && slices.Contains(strings.Split(f[1], ","), hierarchy) {
			// The container's cgroup; its parent is the pod's.
			return filepath.Join("/sys/fs/cgroup", hierarchy, filepath.Dir(f[2]))
		}
	}
	t.Fatalf("no %s cgroup for the agent", hierarchy)
	return ""
}

// memory measures the pod with 1,000 and 100,000 STALE entries on the
// node: its cgroup's working set and peak, and its CPU over a minute of
// idling with them.
func (k *kube) memory(t *testing.T) {
	t.Helper()
	mem, cpu := k.podCgroup(t, "memory"), k.podCgroup(t, "cpuacct")
	k.Node.MustIP(t, "link", "add", "bulk0", "type", "veth", "peer", "name", "bulk1")
	t.Cleanup(func() { _ = k.Node.IP("link", "del", "bulk0") })
	k.Node.MustIP(t, "link", "set", "bulk0", "up")
	k.Node.MustIP(t, "link", "set", "bulk1", "up")
	for _, fam := range []string{"ipv4", "ipv6"} {
		if err := k.Node.Sysctl("net."+fam+".neigh.bulk0.gc_stale_time", "3600"); err != nil {
			t.Fatal(err)
		}
	}
	have := 0
	for _, n := range []int{1000, 100000} {
		var lines []string
		for i := have; i < n; i++ {
			// HostIP numbers 65,024 addresses a /16.
			lines = append(lines, fmt.Sprintf("neigh replace %s lladdr %s dev bulk0 nud stale", lab.HostIP(byte(210+i/65024), i%65024), lab.HostMAC(i, 7)))
		}
		// The peak from here on.
		if err := os.WriteFile(filepath.Join(mem, "memory.max_usage_in_bytes"), []byte("0"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := k.Node.Batch(lines); err != nil {
			t.Fatal(err)
		}
		have = n
		lab.WaitFor(t, 3*time.Minute, fmt.Sprintf("the agent's table to hold the %d entries", n), func() bool {
			body := k.scrape(t)
			return metricValue(body, `neighwatch_neighbours{family="inet",interface="bulk0",state="stale"}`) == strconv.Itoa(n)
		})
		// Idle with them, once the tracer holds them too and a little
		// after: the CPU over a minute, then the memory.
		lab.WaitFor(t, 3*time.Minute, "the tracer ready with the entries", func() bool {
			code, _, err := httpGet("http://" + net.JoinHostPort(k.node.NodeIP().String(), "9947") + "/readyz/tracer")
			return err == nil && code == http.StatusOK
		})
		time.Sleep(20 * time.Second)
		read := func() uint64 {
			b, err := os.ReadFile(filepath.Join(cpu, "cpuacct.usage"))
			if err != nil {
				t.Fatal(err)
			}
			v, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
			return v
		}
		c0, t0 := read(), time.Now()
		time.Sleep(time.Minute)
		used := time.Duration(read() - c0)
		working, peak := cgroupMemory(t, mem)
		k.figures.add(t, "pod with %d STALE entries on the node: working set %.1f MiB, peak %.1f MiB (its cgroup), idle CPU %.2f %% of a core over %v",
			n, float64(working)/(1<<20), float64(peak)/(1<<20), 100*used.Seconds()/time.Since(t0).Seconds(), time.Since(t0).Round(time.Second))
	}
	k.Node.MustIP(t, "link", "del", "bulk0")
}

// tcxPrograms lists the programs attached at tcx ingress of dev in the
// node's namespace.
func (k *kube) tcxPrograms(t *testing.T, dev string) []ebpf.ProgramID {
	t.Helper()
	var ids []ebpf.ProgramID
	err := k.Node.Do(func() error {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		res, err := link.QueryPrograms(link.QueryOptions{Target: ifi.Index, Attach: ebpf.AttachTCXIngress})
		if err != nil {
			return err
		}
		for _, p := range res.Programs {
			ids = append(ids, p.ID)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// bpfPrograms lists the BPF programs loaded on the host, by ID, with
// their names.
func bpfPrograms(t *testing.T) map[ebpf.ProgramID]string {
	t.Helper()
	progs := map[ebpf.ProgramID]string{}
	var id ebpf.ProgramID
	for {
		next, err := ebpf.ProgramGetNextID(id)
		if err != nil {
			return progs
		}
		id = next
		p, err := ebpf.NewProgramFromID(id)
		if err != nil {
			continue
		}
		if info, err := p.Info(); err == nil {
			progs[id] = info.Name
		}
		p.Close()
	}
}

// rollout: helm upgrade to a new image rolls the DaemonSet; the old pod
// gets the kubelet's SIGTERM, releases its managed entries and detaches
// its datapath, and exits within its grace period; the new pod takes
// over. The longest gap in the node's metrics is measured.
func (k *kube) rollout(t *testing.T, ns string) {
	t.Helper()
	revision := lab.Unique("next")
	image := "localhost/neighwatch/neighwatch:" + revision
	if out, err := exec.Command("make", "-C", "..", "image", "IMAGE="+image, "REVISION="+revision).CombinedOutput(); err != nil {
		t.Fatalf("make image of the next revision: %v\n%s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("podman", "manifest", "rm", image).Run() })
	digestFile := filepath.Join(t.TempDir(), "digest")
	if out, err := exec.Command("podman", "manifest", "push", "--all", "--tls-verify=false", "--digestfile", digestFile, image,
		"docker://"+k.node.Registry()+"/neighwatch/neighwatch:"+k.version+"-"+revision).CombinedOutput(); err != nil {
		t.Fatalf("podman manifest push: %v\n%s", err, out)
	}
	d, err := os.ReadFile(digestFile)
	if err != nil {
		t.Fatal(err)
	}
	pods := k.agentPods(t, ns)
	if len(pods) != 1 {
		t.Fatalf("%d agent pods before the rollout", len(pods))
	}
	old := pods[0]
	oldProgs := k.tcxPrograms(t, lab.NodeClientIf)
	if len(oldProgs) == 0 {
		t.Fatalf("no program at tcx ingress of %s before the rollout: the agent's datapath is not attached", lab.NodeClientIf)
	}
	// Traffic through both bypassing forwarders (the lab's on the
	// backend's side, the agent's datapath on the client's) until the end:
	// the scope at-risk has the agent keep both entries managed.
	stopEcho := make(chan struct{})
	echoing := make(chan struct{})
	go func() {
		defer close(echoing)
		for {
			select {
			case <-stopEcho:
				return
			case <-time.After(200 * time.Millisecond):
			}
			_ = k.Client.Ping(k.backend, 1, 200*time.Millisecond)
		}
	}()
	defer func() { close(stopEcho); <-echoing }()
	var managed control.Entry
	lab.WaitFor(t, 2*time.Minute, "an entry managed by neighwatch before the rollout", func() bool {
		for _, e := range k.entries(t) {
			if e.ManagedBy == "neighwatch" {
				managed = e
				return true
			}
		}
		return false
	})
	managedIP := netip.MustParseAddr(managed.IP)
	isManaged := func() bool {
		e, err := k.Node.KernelEntry(managed.Interface, managedIP)
		return err == nil && e.Managed()
	}
	if !isManaged() {
		t.Fatalf("the agent says it manages %s on %s; the kernel's entry is not managed", managed.IP, managed.Interface)
	}
	// The old pod's log to its end, as kubectl logs -f shows it.
	logCtx, stopLog := context.WithCancel(context.Background())
	defer stopLog()
	follow := exec.CommandContext(logCtx, k.tools.Nwk8s, "kubectl", "--kubeconfig", k.node.Kubeconfig(), "logs", "-f", "-n", ns, old.Name)
	var oldLog bytes.Buffer
	follow.Stdout = &oldLog
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	followed := make(chan struct{})
	go func() { _ = follow.Wait(); close(followed) }()
	// Scrape the node's address every 100 ms meanwhile, and watch the old
	// pod's status and the managed flag of the client's entry.
	var (
		mu        sync.Mutex
		scrapes   []time.Time
		lastOld   corev1.Pod
		released  time.Time
		oldGone   time.Time
		revisions = map[string]bool{}
	)
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if code, body, err := httpGet("http://" + net.JoinHostPort(k.node.NodeIP().String(), "9947") + "/metrics"); err == nil && code == 200 {
				mu.Lock()
				scrapes = append(scrapes, time.Now())
				if i := strings.Index(body, `neighwatch_build_info{`); i >= 0 {
					if j := strings.Index(body[i:], `revision="`); j >= 0 {
						rest := body[i+j+len(`revision="`):]
						revisions[rest[:strings.IndexByte(rest, '"')]] = true
					}
				}
				mu.Unlock()
			}
			out, err := k.kubectl(nil, "get", "pod", "-n", ns, old.Name, "-o", "json")
			mu.Lock()
			if err == nil {
				_ = json.Unmarshal(out, &lastOld)
			} else if oldGone.IsZero() && strings.Contains(err.Error(), "NotFound") {
				oldGone = time.Now()
			}
			if released.IsZero() && !isManaged() {
				released = time.Now()
			}
			mu.Unlock()
		}
	}()
	// The ConfigMap was edited by hand (configEdits): Helm 4 applies
	// server-side and refuses to take the field back from kubectl's
	// field manager; --force-conflicts takes it, with the values' config
	// (which now carries the hand edit's scope), as the README says.
	upgrade := []string{"upgrade", "neighwatch", k.chart, "--version", k.version, "--plain-http", "-n", ns,
		"--reuse-values", "--set", "image.digest=" + strings.TrimSpace(string(d)), "--set", "config.remediation\\.scope=at-risk"}
	upgraded := time.Now()
	if out, err := k.helmRun(t, "4", upgrade...); err == nil || !strings.Contains(string(out), "conflict with \"kubectl-patch\"") {
		t.Fatalf("helm 4 upgrade after a hand edit of the ConfigMap: %v, want the conflict the README names\n%s", err, out)
	}
	if _, err := k.helmRun(t, "4", append(upgrade, "--force-conflicts")...); err != nil {
		t.Fatal(err)
	}
	fresh := k.waitReadyPod(t, ns, 3*time.Minute, string(old.UID))
	ready := time.Now()
	select {
	case <-followed:
	case <-time.After(lab.Patience(30 * time.Second)):
		t.Errorf("kubectl logs -f of the old pod did not end")
	}
	// A few more scrapes of the new pod.
	time.Sleep(2 * time.Second)
	close(stop)
	<-watched
	mu.Lock()
	defer mu.Unlock()
	var gap time.Duration
	for i := 1; i < len(scrapes); i++ {
		if scrapes[i].After(upgraded) {
			gap = max(gap, scrapes[i].Sub(scrapes[i-1]))
		}
	}
	if !revisions[revision] {
		t.Errorf("the node's metrics never showed the new image's revision %s: %v", revision, revisions)
	}
	cs := lastOld.Status.ContainerStatuses
	if len(cs) != 1 || cs[0].State.Terminated == nil {
		t.Fatalf("the old pod's container was never seen terminated: %+v", cs)
	}
	term := cs[0].State.Terminated
	grace := int64(30)
	if g := old.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = *g
	}
	// The deletion timestamp is when the grace period ends: the kubelet
	// kills what still runs then.
	asked := lastOld.DeletionTimestamp.Add(-time.Duration(grace) * time.Second)
	took := term.FinishedAt.Sub(asked)
	if term.ExitCode != 0 || !term.FinishedAt.Before(lastOld.DeletionTimestamp) {
		t.Errorf("the old agent exited %d (%s) %v after its pod's deletion; want 0 within the grace period of %d s", term.ExitCode, term.Reason, took, grace)
	}
	var releasedLine bool
	for _, l := range strings.Split(oldLog.String(), "\n") {
		releasedLine = releasedLine || (strings.Contains(l, `"released managed entry"`) && strings.Contains(l, `"reason":"exit"`) && strings.Contains(l, `"`+managed.IP+`"`))
	}
	if !releasedLine || released.IsZero() || released.After(term.FinishedAt.Add(2*time.Second)) {
		t.Errorf("the old agent did not release its managed entry %s on %s on SIGTERM (log line %v, kernel flag cleared at %v, exit at %v)\n%s",
			managed.IP, managed.Interface, releasedLine, released, term.FinishedAt.Time, tail(oldLog.String(), 15))
	}
	now := k.tcxPrograms(t, lab.NodeClientIf)
	for _, id := range oldProgs {
		if slices.Contains(now, id) {
			t.Errorf("the old agent's datapath program %d is still attached to %s after the rollout", id, lab.NodeClientIf)
		}
		if p, err := ebpf.NewProgramFromID(id); err == nil {
			p.Close()
			t.Errorf("the old agent's datapath program %d is still loaded after the rollout", id)
		}
	}
	if len(now) == 0 {
		t.Errorf("the new agent attached no datapath to %s", lab.NodeClientIf)
	}
	k.figures.add(t, "helm upgrade to a new image: old agent exited %d %v after its pod's deletion (grace %d s), new pod %s Ready %v after the upgrade; longest gap in the node's metrics %v (scraped every 100 ms)",
		term.ExitCode, took.Round(100*time.Millisecond), grace, fresh.Name, ready.Sub(upgraded).Round(100*time.Millisecond), gap.Round(100*time.Millisecond))
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// uninstall: helm uninstall leaves the node with no agent, no managed
// entry, no tc or tcx program of the agent's, no BPF program of its
// loaded, and nothing in the socket's directory.
func (k *kube) uninstall(t *testing.T, v, ns string, before map[ebpf.ProgramID]string) {
	t.Helper()
	if _, err := k.helmRun(t, v, "uninstall", "neighwatch", "-n", ns, "--wait"); err != nil {
		t.Fatal(err)
	}
	lab.WaitFor(t, 2*time.Minute, "the agent's pods gone", func() bool { return len(k.agentPods(t, ns)) == 0 })
	lab.WaitFor(t, time.Minute, "the agent's process gone", func() bool {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm")); err == nil && strings.TrimSpace(string(b)) == "neighwatch" {
				return false
			}
		}
		return true
	})
	all, err := k.Node.Neighbours()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range all {
		if ip, err := netip.ParseAddr(n.Dst); err == nil {
			if e, err := k.Node.KernelEntry(n.Dev, ip); err == nil && e.Managed() {
				t.Errorf("a managed entry is left on the node: %+v", n)
			}
		}
	}
	for id, name := range bpfPrograms(t) {
		if _, ok := before[id]; !ok && !strings.HasPrefix(name, "fwd_") {
			t.Errorf("BPF program %d (%s) is still loaded after helm uninstall", id, name)
		}
	}
	for _, dev := range []string{lab.NodeClientIf, lab.NodeBackendIf, "k8s0"} {
		for _, id := range k.tcxPrograms(t, dev) {
			p, err := ebpf.NewProgramFromID(id)
			if err != nil {
				continue
			}
			info, _ := p.Info()
			p.Close()
			if info == nil || !strings.HasPrefix(info.Name, "fwd_") {
				t.Errorf("a program is left at tcx ingress of %s: %d %v", dev, id, info)
			}
		}
	}
	ents, err := os.ReadDir(k.nodePath("/run/neighwatch"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("left in the node's /run/neighwatch after helm uninstall: %s", e.Name())
	}
}

// podSecurity: helm install into a namespace at Pod Security baseline
// or restricted is refused by the chart, which reads the namespace's
// label and names the one to set; past that check (checkPodSecurity
// false) the API server refuses the agent's pods with its reasons, which
// the DaemonSet's events carry and Helm prints as warnings; privileged
// (the label the NOTES and the README name) admits them (operate).
func (k *kube) podSecurity(t *testing.T) {
	for _, level := range []string{"baseline", "restricted"} {
		t.Run(level, func(t *testing.T) {
			ns := "neighwatch-" + level
			k.namespace(t, ns, map[string]string{"pod-security.kubernetes.io/enforce": level, "pod-security.kubernetes.io/warn": level})
			values := writeValues(t, clusterValues(t, ""))
			// The chart reads the namespace's label and refuses it, naming
			// the label to set.
			out, err := k.helmRun(t, "4", "install", "neighwatch", k.chart, "--version", k.version, "--plain-http", "-n", ns, "-f", values)
			want := "namespace " + ns + " enforces Pod Security " + level + ", which refuses the agent's pods"
			if err == nil || !strings.Contains(string(out), want) {
				t.Errorf("helm install into a namespace at %s: %v, want refused with %q:\n%s", level, err, want, out)
			}
			if err == nil {
				_, _ = k.helmRun(t, "4", "uninstall", "neighwatch", "-n", ns, "--wait")
			}
			// Past the chart's check, the API server refuses the pods.
			out, err = k.helmRun(t, "4", "install", "neighwatch", k.chart, "--version", k.version, "--plain-http", "-n", ns, "-f", values,
				"--set", "checkPodSecurity=false")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _, _ = k.helmRun(t, "4", "uninstall", "neighwatch", "-n", ns, "--wait") })
			// Helm prints the API server's warning through klog, its quotes
			// escaped.
			if !strings.Contains(strings.ReplaceAll(string(out), `\"`, `"`), `would violate PodSecurity "`+level+`:latest"`) {
				t.Errorf("helm install printed no Pod Security warning:\n%s", out)
			}
			var msg string
			lab.WaitFor(t, time.Minute, "the DaemonSet's FailedCreate event", func() bool {
				var events corev1.EventList
				k.getJSON(t, &events, "events", "-n", ns, "--field-selector", "reason=FailedCreate")
				for _, e := range events.Items {
					if e.InvolvedObject.Kind == "DaemonSet" && strings.Contains(e.Message, "violates PodSecurity") {
						msg = e.Message
						return true
					}
				}
				return false
			})
			for _, want := range []string{`violates PodSecurity "` + level + `:latest"`, "hostNetwork=true", "hostPath"} {
				if !strings.Contains(msg, want) {
					t.Errorf("the refusal %q does not say %q", msg, want)
				}
			}
			if pods := k.agentPods(t, ns); len(pods) != 0 {
				t.Errorf("Pod Security %s admitted %d pods", level, len(pods))
			}
			t.Logf("%s: %s", level, msg)
		})
	}
}

// corpusAdmitted: every values file of the chart's corpus
// (internal/dev/manifests/testdata/values, and the chart's ci/) that the
// chart renders is admitted by this API server as Helm 4 renders it for
// this cluster (prometheus-operator's CRDs served): kubectl apply
// --dry-run=server with strict field validation. Those the chart refuses
// are TestValuesCorpus's: refused with one line.
func (k *kube) corpusAdmitted(t *testing.T) {
	// The corpus renders for namespace neighwatch (a jobSelector file
	// matches it); full-values.yaml puts everything in node-agents, some
	// the dashboards and monitors in monitoring. Made here, left for
	// helm4 (which deletes neighwatch when it ends).
	const ns = "neighwatch"
	for _, n := range []string{ns, "node-agents", "monitoring"} {
		k.mustKubectl(t, []byte(`{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "`+n+`",
			"labels": {"pod-security.kubernetes.io/enforce": "privileged"}}}`), "apply", "-f", "-")
	}
	files, _ := filepath.Glob("../internal/dev/manifests/testdata/values/*.yaml")
	ci, _ := filepath.Glob("../deploy/helm/neighwatch/ci/*-values.yaml")
	files = append(files, ci...)
	admitted := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "\n# expect: refused") {
			continue
		}
		out, err := k.helmRun(t, "4", "template", "neighwatch", "../deploy/helm/neighwatch", "--namespace", ns, "--kube-version", cluster.KubeVersion,
			"--api-versions", "monitoring.coreos.com/v1", "--api-versions", "monitoring.coreos.com/v1alpha1", "--values", f)
		if err != nil {
			t.Errorf("%s: %v", filepath.Base(f), err)
			continue
		}
		if _, err := k.kubectl(out, "apply", "--dry-run=server", "--validate=strict", "-f", "-"); err != nil {
			t.Errorf("%s: the API server refuses the render: %v", filepath.Base(f), err)
			continue
		}
		admitted++
	}
	k.figures.add(t, "values corpus: %d renders admitted by the API server (kubectl apply --dry-run=server --validate=strict) of %d files; the rest the chart refuses", admitted, len(files))
}
