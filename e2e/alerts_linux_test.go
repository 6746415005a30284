package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/neighwatch/neighwatch/internal/dev/lab"
	"github.com/prometheus/common/model"
	"sigs.k8s.io/yaml"
)

// requireProgram fails in CI and skips elsewhere when a program the test
// runs is not installed.
func requireProgram(t testing.TB, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s missing in CI: scripts/install-deps.sh installs the %s package", name, pkg)
		}
		t.Skipf("%s not installed (Debian package %s)", name, pkg)
	}
	return p
}

// amAlert is one alert in an Alertmanager webhook notification.
type amAlert struct {
	Status      string            `json:"status"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// hookLog records every alert Alertmanager delivers, with when it came.
type hookLog struct {
	mu  sync.Mutex
	got []hooked
}

// hooked is one alert of one notification.
type hooked struct {
	at       time.Time
	a        amAlert
	group    string // the notification's groupKey: one page to a pager
	receiver string // the receiver Alertmanager routed it to
	status   string // the notification's: resolved when all its alerts are
}

func (h *hookLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var msg struct {
		GroupKey string    `json:"groupKey"`
		Receiver string    `json:"receiver"`
		Status   string    `json:"status"`
		Alerts   []amAlert `json:"alerts"`
	}
	if err := json.NewDecoder(r.Body).Decode(&msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	for _, a := range msg.Alerts {
		h.got = append(h.got, hooked{time.Now(), a, msg.GroupKey, msg.Receiver, msg.Status})
	}
	h.mu.Unlock()
}

// matching returns the alerts delivered with these labels (any
// alertname), each with its notification.
func (h *hookLog) matching(labels map[string]string) []hooked {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []hooked
next:
	for _, g := range h.got {
		for k, v := range labels {
			if g.a.Labels[k] != v {
				continue next
			}
		}
		out = append(out, g)
	}
	return out
}

// find returns when the first alert matching came, if one did.
func (h *hookLog) find(name, status string, labels map[string]string) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
next:
	for _, g := range h.got {
		if g.a.Labels["alertname"] != name || g.a.Status != status {
			continue
		}
		for k, v := range labels {
			if g.a.Labels[k] != v {
				continue next
			}
		}
		return g.at, true
	}
	return time.Time{}, false
}

func (h *hookLog) all(name string) []amAlert {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []amAlert
	for _, g := range h.got {
		if g.a.Labels["alertname"] == name {
			out = append(out, g.a)
		}
	}
	return out
}

// groups returns the distinct groupKeys of the notifications that carried
// an alert with these labels (any alertname), in the order they came, and
// how many notifications that was. A pager (PagerDuty, Opsgenie) opens
// one incident per groupKey and updates it with later notifications.
func (h *hookLog) groups(labels map[string]string) (keys []string, notifications int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	seen := map[string]bool{}
next:
	for _, g := range h.got {
		for k, v := range labels {
			if g.a.Labels[k] != v {
				continue next
			}
		}
		notifications++
		if !seen[g.group] {
			seen[g.group] = true
			keys = append(keys, g.group)
		}
	}
	return keys, notifications
}

// startServer runs a program in ns until the test ends, its output kept
// for failures.
func startServer(t testing.TB, ns lab.NS, name string, args ...string) {
	t.Helper()
	cmd := ns.Command(name, args...)
	var out bytes.Buffer
	var mu sync.Mutex
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return out.Write(p) })
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			mu.Lock()
			t.Logf("%s output:\n%s", name, out.String())
			mu.Unlock()
		}
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// promQuery runs an instant query against the lab's Prometheus and
// returns the result; a syntax error is an error.
func promQuery(ns lab.NS, expr string) ([]map[string]any, error) {
	code, body, err := ns.HTTPGet("http://127.0.0.1:9090/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		return nil, err
	}
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []map[string]any `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		return nil, fmt.Errorf("HTTP %d: %v: %s", code, err, body)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s", r.Error)
	}
	return r.Data.Result, nil
}

// alerting is how startAlertingWith runs Prometheus and Alertmanager.
type alerting struct {
	// forDivisor divides every rule's for: (0: all become 2 s), keeping
	// their ratios where a test needs them; -1 keeps them as they are.
	forDivisor int
	// targets are the agents to scrape (address -> instance label), and
	// labels go on all of them; empty: the agent at metricsAddr.
	targets map[string]string
	labels  map[string]string
	// inhibit is Alertmanager's inhibit_rules, as YAML.
	inhibit string
	// routes are child routes under Alertmanager's root route, as YAML
	// whose top level is "routes:" (deploy/prometheus/alertmanager-route.yml),
	// their group timings divided by forDivisor as the rules' for: are.
	routes string
	// receivers are more receivers beside the root's (test, the webhook),
	// as YAML list items at the top level.
	receivers string
	// prometheus is the Prometheus to run (empty: Debian's), and scrape
	// its scrape_configs' items, as YAML at the list's indentation, in
	// place of the targets (a Kubernetes service discovery's); it waits
	// for scraped targets of job neighwatch.
	prometheus, scrape string
	scraped            int
}

// shippedAlerts returns deploy/prometheus/alerts.yml, the rules the
// project ships.
func shippedAlerts(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile("../deploy/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// startAlerting runs the real Prometheus and Alertmanager in ns: the
// agent at metricsAddr is scraped every second, alerts (their for:
// shortened to 2 s) are evaluated every second, and Alertmanager delivers
// to the returned log. It returns once Prometheus scrapes the agent.
func startAlerting(t testing.TB, ns lab.NS, alerts []byte) *hookLog {
	return startAlertingWith(t, ns, alerts, alerting{})
}

// shortenFor divides the for: of every rule by d (0: 2 s each). The
// rule file is jsonnet's YAML, which quotes the durations; a file with no
// for: to shorten is an error (its layout changed under this function).
func shortenFor(t testing.TB, alerts []byte, d int) []byte {
	re := regexp.MustCompile(`(?m)^(\s+for:) "?([0-9a-z]+)"?$`)
	n := 0
	out := re.ReplaceAllFunc(alerts, func(line []byte) []byte {
		m := re.FindSubmatch(line)
		v, err := model.ParseDuration(string(m[2]))
		if err != nil {
			t.Fatalf("for: %s: %v", m[2], err)
		}
		n++
		short := 2 * time.Second
		if d > 0 {
			short = max(time.Duration(v)/time.Duration(d), time.Second)
		}
		return []byte(string(m[1]) + " " + model.Duration(short).String())
	})
	if n == 0 {
		t.Fatal("the rule file has no for: to shorten")
	}
	return out
}

// shortenTimings divides an Alertmanager route's group_wait,
// group_interval and repeat_interval by d, as shortenFor does the rules'
// for: (at least 100 ms each).
func shortenTimings(t testing.TB, routes string, d int) string {
	re := regexp.MustCompile(`(?m)^(\s+(?:group_wait|group_interval|repeat_interval):) (\S+)$`)
	return re.ReplaceAllStringFunc(routes, func(line string) string {
		m := re.FindStringSubmatch(line)
		v, err := model.ParseDuration(m[2])
		if err != nil {
			t.Fatalf("%s %s: %v", m[1], m[2], err)
		}
		return m[1] + " " + model.Duration(max(time.Duration(v)/time.Duration(max(d, 1)), 100*time.Millisecond)).String()
	})
}

// indent puts prefix before every line of s that is not a comment or blank.
func indent(s, prefix string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if t := strings.TrimSpace(l); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		out = append(out, prefix+l)
	}
	return strings.Join(out, "\n")
}

// startAlertingWith is startAlerting with the scrape targets, the rules' for: and the
// inhibition a says.
func startAlertingWith(t testing.TB, ns lab.NS, alerts []byte, a alerting) *hookLog {
	t.Helper()
	prom := a.prometheus
	if prom == "" {
		prom = requireProgram(t, "prometheus", "prometheus")
	}
	am := requireProgram(t, "prometheus-alertmanager", "prometheus-alertmanager")
	hooks := &hookLog{}
	var ln net.Listener
	if err := ns.Do(func() (err error) { ln, err = net.Listen("tcp", "127.0.0.1:9099"); return err }); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: hooks, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })

	dir := t.TempDir()
	targets := a.targets
	if len(targets) == 0 {
		targets = map[string]string{metricsAddr: ""}
	}
	var static strings.Builder
	for addr, inst := range targets {
		fmt.Fprintf(&static, "      - targets: ['%s']\n", addr)
		labels := map[string]string{}
		for k, v := range a.labels {
			labels[k] = v
		}
		if inst != "" {
			labels["instance"] = inst
		}
		if len(labels) > 0 {
			static.WriteString("        labels:\n")
			for k, v := range labels {
				fmt.Fprintf(&static, "          %s: %s\n", k, v)
			}
		}
	}
	scrape := "  - job_name: neighwatch\n    static_configs:\n" + static.String()
	want := len(targets)
	if a.scrape != "" {
		scrape, want = a.scrape, a.scraped
	}
	// forDivisor -1: the rules' own for:, as the chart's values set them.
	rules := alerts
	if a.forDivisor >= 0 {
		rules = shortenFor(t, alerts, a.forDivisor)
	}
	files := map[string]string{
		"rules.yml": string(rules),
		"prometheus.yml": `global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [rules.yml]
alerting:
  alertmanagers:
    - static_configs:
        - targets: ['127.0.0.1:9093']
scrape_configs:
` + scrape,
		"alertmanager.yml": `route:
  receiver: test
  group_by: [alertname, cluster, instance, interface, ip, feature]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
` + indent(shortenTimings(t, a.routes, a.forDivisor), "  ") + `
receivers:
  - name: test
    webhook_configs:
      - url: http://127.0.0.1:9099/hook
        send_resolved: true
` + a.receivers + a.inhibit,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	startServer(t, ns, am, "--config.file="+filepath.Join(dir, "alertmanager.yml"), "--storage.path="+filepath.Join(dir, "am"),
		"--web.listen-address=127.0.0.1:9093", "--cluster.listen-address=")
	startServer(t, ns, prom, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "prom"),
		"--web.listen-address=127.0.0.1:9090")
	for _, u := range []string{"http://127.0.0.1:9093/-/ready", "http://127.0.0.1:9090/-/ready"} {
		lab.WaitFor(t, 60*time.Second, u, func() bool {
			code, _, err := ns.HTTPGet(u)
			return err == nil && code == 200
		})
	}
	// A target discovered through Kubernetes is scraped at its interval
	// (the chart's 30 s), its first scrape anywhere within one.
	scrapeWait := 30 * time.Second
	if a.scrape != "" {
		scrapeWait = 2 * time.Minute
	}
	lab.WaitFor(t, scrapeWait, "Prometheus to scrape the agents", func() bool {
		r, err := promQuery(ns, `up{job="neighwatch"} == 1`)
		return err == nil && len(r) == want
	})
	return hooks
}

// TestDetectionBlindAlert: an agent whose source-MAC program is taken
// away (--debug.refuse-programs, as if the kernel refused it) reports
// source-mac blind on every watched Ethernet interface, and the real
// Prometheus and Alertmanager deliver NeighwatchDetectionBlind for it and
// for nothing else; once an agent with the program runs again, the alert
// resolves.
func TestDetectionBlindAlert(t *testing.T) {
	lab.Require(t)
	requireProgram(t, "prometheus", "prometheus")
	requireProgram(t, "prometheus-alertmanager", "prometheus-alertmanager")
	t.Parallel()
	l := lab.New(t, "blind")
	sock := sockPath(t)
	args := []string{"--stale-threshold", "2s", "--tracer", "xmit"}
	a := startAgent(t, l.Node, sock, append(args, "--debug.refuse-programs", "tr_source")...)
	body := a.metrics(t)
	for _, want := range []string{
		`neighwatch_detection_working{feature="source-mac",interface="n0"} 0`,
		`neighwatch_detection_working{feature="bypass",interface="n0"} 1`,
		`neighwatch_tracer_program_loaded{hook="tc",program="tr_source",refusal="disabled"} 0`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("metrics lack %s\n%s", want, grep(body, "detection_working"))
		}
	}
	if !strings.Contains(a.logs(), "tracer: source-mac detection off") {
		t.Errorf("no log line names the lost feature:\n%s", grep(a.logs(), "tracer"))
	}
	out, err := exec.Command(binPath, "tracer", "--control.socket", sock).CombinedOutput()
	if err != nil || !regexp.MustCompile(`(?m)^n0\s+source-mac\s+.*--debug.refuse-programs`).Match(out) {
		t.Errorf("neighwatch tracer: %v\n%s", err, out)
	}
	t.Logf("neighwatch tracer:\n%s", out)
	alerts := shippedAlerts(t)
	hooks := startAlerting(t, l.Node, alerts)
	blind := map[string]string{"feature": "source-mac", "interface": lab.NodeClientIf}
	lab.WaitFor(t, 60*time.Second, "NeighwatchDetectionBlind firing for source-mac on n0", func() bool {
		_, ok := hooks.find("NeighwatchDetectionBlind", "firing", blind)
		return ok
	})
	for _, al := range hooks.all("NeighwatchDetectionBlind") {
		if al.Labels["feature"] != "source-mac" || al.Labels["severity"] != "warning" || al.Annotations["runbook_url"] == "" {
			t.Errorf("unexpected NeighwatchDetectionBlind: %+v", al)
		}
	}
	// The hook is back: the same agent without the refusal.
	a.stop(t)
	restarted := time.Now()
	a2 := startAgent(t, l.Node, sock, args...)
	if v := metricValue(a2.metrics(t), `neighwatch_detection_working{feature="source-mac",interface="n0"}`); v != "1" {
		t.Errorf("source-mac after the restart: %q, want 1", v)
	}
	lab.WaitFor(t, 60*time.Second, "NeighwatchDetectionBlind resolved for source-mac on n0", func() bool {
		_, ok := hooks.find("NeighwatchDetectionBlind", "resolved", blind)
		return ok
	})
	fired, _ := hooks.find("NeighwatchDetectionBlind", "firing", blind)
	resolved, _ := hooks.find("NeighwatchDetectionBlind", "resolved", blind)
	t.Logf("NeighwatchDetectionBlind fired at %s, resolved %v after the program was back", fired.Format(time.TimeOnly),
		resolved.Sub(restarted).Round(100*time.Millisecond))
}

// TestAlertsEndToEnd: the real Prometheus scrapes the agent in the lab
// and evaluates deploy/prometheus/alerts.yml (for: shortened to 2s); the
// real Alertmanager delivers to a webhook here. A healthy host whose
// traffic bypasses re-validation raises only the info alert, never
// NeighbourEntryStuck; after the host moves, NeighbourEntryStuck arrives
// naming its IP, and it resolves after `neighwatch remediation on`. Then
// every expression of the rules and of the Grafana dashboard must parse
// in that Prometheus and use only metric names the agent exposes.
func TestAlertsEndToEnd(t *testing.T) {
	lab.Require(t)
	requireProgram(t, "prometheus", "prometheus")
	requireProgram(t, "prometheus-alertmanager", "prometheus-alertmanager")
	t.Parallel()

	m := newMovedClient(t, "alr", false)
	sock := sockPath(t)
	// The default strategies: manage first, on this kernel.
	a := startAgent(t, m.Node, sock, remediationArgs("--datapath.mode", "legacy", "--remediation", "dry-run")...)
	m.agent = a
	clientIP := m.ip.String()

	alerts := shippedAlerts(t)
	hooks := startAlerting(t, m.Node, alerts)

	// Traffic flows; the client's entry goes STALE and only the bypassing
	// datapath reaches it: at-risk. The info alert must arrive, the stuck
	// one must not.
	stop := make(chan struct{})
	pinging := make(chan struct{})
	go func() {
		defer close(pinging)
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = m.Client.Ping(m.backend, 1, 300*time.Millisecond)
			time.Sleep(200 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { close(stop); <-pinging })
	lab.WaitFor(t, 60*time.Second, "NeighbourReValidationBypassed for "+lab.NodeClientIf, func() bool {
		_, ok := hooks.find("NeighbourReValidationBypassed", "firing", map[string]string{"interface": lab.NodeClientIf})
		return ok
	})
	if e, ok := findEntry(statusJSON(t, sock), lab.NodeClientIf, clientIP); !ok || e.Class != "at-risk" {
		t.Fatalf("before the move the client's entry is %+v, want class at-risk", e)
	}
	if got := hooks.all("NeighbourEntryStuck"); len(got) > 0 {
		t.Fatalf("NeighbourEntryStuck fired for a healthy host: %+v", got)
	}

	// The host moves: the stuck alert arrives naming it.
	moved := time.Now()
	m.move(t)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, ok := hooks.find("NeighbourEntryStuck", "firing", map[string]string{"ip": clientIP}); ok {
			break
		}
		if time.Now().After(deadline) {
			e, _ := findEntry(statusJSON(t, sock), lab.NodeClientIf, clientIP)
			body := a.metrics(t)
			t.Fatalf("no NeighbourEntryStuck for %s 60 s after the move; the entry: %+v\n%s\n%s", clientIP, e, grep(body, "stuck"), grep(body, "tracer"))
		}
	}
	fired, _ := hooks.find("NeighbourEntryStuck", "firing", map[string]string{"ip": clientIP})
	// The metric names the agent exposes, while an entry is stuck (its
	// info series exist only then) and at the end.
	exposed := map[string]bool{"up": true}
	addExposed := func(body string) {
		for _, l := range strings.Split(body, "\n") {
			if name, ok := strings.CutPrefix(l, "# TYPE "); ok {
				exposed[strings.Fields(name)[0]] = true
			}
		}
	}
	addExposed(a.metrics(t))
	t.Logf("NeighbourEntryStuck arrived %v after the move", fired.Sub(moved).Round(100*time.Millisecond))

	out, err := exec.Command(binPath, "remediation", "--control.socket", sock, "on").CombinedOutput()
	if err != nil {
		t.Fatalf("neighwatch remediation on: %v\n%s", err, out)
	}
	on := time.Now()
	lab.WaitFor(t, 60*time.Second, "NeighbourEntryStuck resolved for "+clientIP, func() bool {
		_, ok := hooks.find("NeighbourEntryStuck", "resolved", map[string]string{"ip": clientIP})
		return ok
	})
	resolved, _ := hooks.find("NeighbourEntryStuck", "resolved", map[string]string{"ip": clientIP})
	t.Logf("NeighbourEntryStuck resolved %v after remediation on", resolved.Sub(on).Round(100*time.Millisecond))
	for _, al := range hooks.all("NeighbourEntryStuck") {
		if al.Labels["ip"] != clientIP {
			t.Errorf("NeighbourEntryStuck for a host that did not move: %v", al.Labels)
		}
		if al.Annotations["runbook_url"] == "" {
			t.Errorf("NeighbourEntryStuck arrived without runbook_url")
		}
	}

	// Every expression parses in this Prometheus and names only metrics
	// the agent exposes.
	// Series that exist only when there is something to count: a managed
	// entry of another owner (as Cilium makes them) brings
	// neighwatch_managed_neighbours.
	otherManaged(t, m.Node, "10.0.1.98", "02:00:00:00:98:98")
	lab.WaitFor(t, 10*time.Second, "the other owner's managed entry in the metrics", func() bool {
		return strings.Contains(a.metrics(t), `neighwatch_managed_neighbours{`)
	})
	addExposed(a.metrics(t))
	for _, expr := range dashboardAndRuleExprs(t, alerts) {
		if _, err := promQuery(m.Node, expr); err != nil {
			t.Errorf("%s: %v", expr, err)
		}
		for _, name := range regexp.MustCompile(`\b(neighwatch_[a-z0-9_]+|up)\b`).FindAllString(expr, -1) {
			base := name
			for _, suf := range []string{"_bucket", "_count", "_sum"} {
				if b, ok := strings.CutSuffix(name, suf); ok && exposed[b] {
					base = b
				}
			}
			if !exposed[base] {
				t.Errorf("%s: the agent exposes no metric %s", expr, name)
			}
		}
	}
}

// dashboardAndRuleExprs returns every rule expression and every
// dashboard target expression, Grafana's variables replaced by values
// Prometheus accepts.
func dashboardAndRuleExprs(t *testing.T, alerts []byte) []string {
	t.Helper()
	var rules struct {
		Groups []struct {
			Rules []struct {
				Expr string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(alerts, &rules); err != nil {
		t.Fatal(err)
	}
	var exprs []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
		}
	}
	b, err := os.ReadFile("../deploy/grafana/neighwatch.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash any
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	vars := strings.NewReplacer("$__rate_interval", "1m", "$__interval", "1m", "$__range", "1h", "$instance", ".*", "$interface", ".*",
		"$cluster", ".*", "$job", ".*")
	n := len(exprs)
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(v))
			for k := range v {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if s, ok := v[k].(string); ok && k == "expr" {
					exprs = append(exprs, vars.Replace(s))
				} else {
					walk(v[k])
				}
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(dash)
	if n == 0 || len(exprs) == n {
		t.Fatalf("read %d rule and %d dashboard expressions", n, len(exprs)-n)
	}
	for _, e := range exprs {
		if strings.Contains(e, "$") && !strings.Contains(e, "{{") {
			t.Errorf("an unknown Grafana variable is left in %q", e)
		}
	}
	return exprs
}
