package manifests

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	monitoringv1alpha1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// TestChartVersionIsVERSION: the chart's version and appVersion are the
// VERSION file's.
func TestChartVersionIsVERSION(t *testing.T) {
	v, err := Version(root)
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(read(t, ChartDir+"/Chart.yaml"), &c); err != nil {
		t.Fatal(err)
	}
	if c.Version != v || c.AppVersion != v {
		t.Errorf("Chart.yaml: version %q, appVersion %q; VERSION says %q", c.Version, c.AppVersion, v)
	}
}

// TestChartCopies: the chart's copies of the rules and the dashboard are
// the files they copy (make manifests writes them).
func TestChartCopies(t *testing.T) {
	for dst, src := range ChartCopies {
		if !bytes.Equal(read(t, dst), read(t, src)) {
			t.Errorf("%s differs from %s: run make manifests", dst, src)
		}
	}
}

// helm runs the pinned helm (the Makefile's HELM) from the repository's
// root.
func helm(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(helmAt(t, HelmModule), args...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return out
}

// requireHelm skips under -short outside CI: the tests build helm from
// the Go module proxy.
func requireHelm(t *testing.T) {
	t.Helper()
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("builds helm from the Go module proxy: not under -short (CI=true runs it)")
	}
}

// render renders the chart as `helm template` does, with values and
// prometheus-operator's API present, and decodes every object strictly.
func render(t *testing.T, values string, api bool) []any {
	t.Helper()
	args := []string{"template", "neighwatch", ChartDir, "--namespace", "neighwatch", "--values", values, "--kube-version", KubeVersion}
	if api {
		args = append(args, "--api-versions", "monitoring.coreos.com/v1", "--api-versions", "monitoring.coreos.com/v1alpha1")
	}
	var objs []any
	for _, doc := range strings.Split(string(helm(t, args...)), "\n---") {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		// The split took the document's last line break: a block scalar
		// at its end (`|` against `|-`) needs it back to decode as Helm
		// wrote it.
		doc += "\n"
		obj, err := Decode([]byte(doc))
		if err != nil {
			t.Fatalf("%s: an object does not decode strictly: %v\n%s", values, err, doc)
		}
		objs = append(objs, obj)
	}
	return objs
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// key names an object: kind/name.
func key(obj any) string {
	m := reflect.ValueOf(obj).Elem().FieldByName("ObjectMeta").Interface().(metav1.ObjectMeta)
	return fmt.Sprintf("%T/%s", obj, m.Name)
}

// helmOnly are the labels the chart adds that a kustomization has no use
// for: who manages the object and which chart made it.
var helmOnly = []string{"helm.sh/chart", "app.kubernetes.io/managed-by"}

// normalize clears what may differ without meaning: Helm's own labels,
// and the rule file's keys (the chart's PrometheusRule re-encodes it).
func normalize(obj any) any {
	m := reflect.ValueOf(obj).Elem().FieldByName("ObjectMeta").Addr().Interface().(*metav1.ObjectMeta)
	for _, l := range helmOnly {
		delete(m.Labels, l)
	}
	return obj
}

// TestChartRendersTheKustomization: lint --strict and template for each
// ci/*-values.yaml; every rendered object decodes strictly into its API
// type; the defaults render the kustomization's objects, object for
// object (but the Namespace, which Helm's --create-namespace makes), and
// the DaemonSet's securityContext of every render is the one the kernel
// matrix runs the agent under.
func TestChartRendersTheKustomization(t *testing.T) {
	requireHelm(t)
	valuesFiles, _ := filepath.Glob(filepath.Join(root, ChartDir, "ci", "*-values.yaml"))
	if len(valuesFiles) < 3 {
		t.Fatalf("%d ci values files", len(valuesFiles))
	}
	kust := map[string]any{}
	obj, err := Decode(read(t, KubeDir+"/kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, res := range obj.(*Kustomization).Resources {
		o, err := Decode(read(t, KubeDir+"/"+res))
		if err != nil {
			t.Fatal(err)
		}
		if _, ns := o.(*corev1.Namespace); !ns {
			kust[key(o)] = o
		}
	}
	ds, err := DaemonSet(root)
	if err != nil {
		t.Fatal(err)
	}
	matrixSC := ds.Spec.Template.Spec.Containers[0].SecurityContext
	for _, vf := range valuesFiles {
		rel, _ := filepath.Rel(root, vf)
		name := strings.TrimSuffix(filepath.Base(vf), "-values.yaml")
		t.Run(name, func(t *testing.T) {
			helm(t, "lint", "--strict", ChartDir, "--values", rel, "--kube-version", KubeVersion)
			objs := render(t, rel, true)
			got := map[string]any{}
			for _, o := range objs {
				got[key(o)] = normalize(o)
				if d, ok := o.(*appsv1.DaemonSet); ok {
					sc := d.Spec.Template.Spec.Containers[0].SecurityContext
					if !reflect.DeepEqual(sc, matrixSC) {
						t.Errorf("the DaemonSet's securityContext differs from deploy/kubernetes's, which the kernel matrix runs the agent under:\n%s", diffYAML(matrixSC, sc))
					}
				}
			}
			without := render(t, rel, false)
			for _, o := range without {
				switch o.(type) {
				case *monitoringv1.PodMonitor, *monitoringv1.ServiceMonitor, *monitoringv1.PrometheusRule, *monitoringv1alpha1.AlertmanagerConfig:
					t.Errorf("%s rendered where the cluster serves no monitoring.coreos.com/v1", key(o))
				}
			}
			if name == "default" {
				for k, want := range kust {
					have, ok := got[k]
					if !ok {
						t.Errorf("the chart does not render %s of the kustomization", k)
						continue
					}
					if !reflect.DeepEqual(have, want) {
						t.Errorf("%s differs from the kustomization's:\n%s", k, diffYAML(want, have))
					}
				}
				for k := range got {
					if _, ok := kust[k]; !ok {
						t.Errorf("the chart renders %s, which the kustomization lacks", k)
					}
				}
			}
			checkValues(t, name, got)
		})
	}
}

// checkValues checks what each ci values file asks of the render.
func checkValues(t *testing.T, name string, got map[string]any) {
	t.Helper()
	has := func(kind any, n string) any { return got[fmt.Sprintf("%T/%s", kind, n)] }
	switch name {
	case "operator":
		if has(&monitoringv1.PodMonitor{}, "neighwatch") != nil {
			t.Error("a PodMonitor with podMonitor.enabled false")
		}
		sm, _ := has(&monitoringv1.ServiceMonitor{}, "neighwatch").(*monitoringv1.ServiceMonitor)
		pr, _ := has(&monitoringv1.PrometheusRule{}, "neighwatch").(*monitoringv1.PrometheusRule)
		if sm == nil || pr == nil || sm.Labels["release"] != "kube-prometheus-stack" || pr.Labels["release"] != "kube-prometheus-stack" {
			t.Fatalf("ServiceMonitor %v and PrometheusRule %v, want both with release: kube-prometheus-stack", sm != nil, pr != nil)
		}
		if rl := sm.Spec.Endpoints[0].RelabelConfigs; len(rl) < 2 || rl[1].TargetLabel != "job" || rl[1].Replacement == nil || *rl[1].Replacement != "node-neighbours" {
			t.Errorf("the ServiceMonitor's relabelings %+v do not give the series the job the rules select (jobName node-neighbours)", rl)
		}
		rules, _ := yaml.Marshal(pr.Spec)
		if strings.Contains(string(rules), `job="neighwatch"`) || strings.Contains(string(rules), "(cluster,") ||
			!strings.Contains(string(rules), `job=~"neighwatch|node-neighbours"`) || !strings.Contains(string(rules), "(k8s_cluster,") {
			t.Error("the rules do not select the values' job and cluster label")
		}
		amc, _ := has(&monitoringv1alpha1.AlertmanagerConfig{}, "neighwatch").(*monitoringv1alpha1.AlertmanagerConfig)
		if amc == nil {
			t.Fatal("no AlertmanagerConfig with alertmanagerConfig.enabled")
		}
		if by := amc.Spec.Route.GroupBy; !slices.Equal(by, []string{"k8s_cluster", "family", "segment", "ip", "lladdr"}) || !slices.Equal(amc.Spec.InhibitRules[0].Equal, by) {
			t.Errorf("the AlertmanagerConfig groups by %v and inhibits on %v: want the values' cluster label, family, segment, ip, lladdr", by, amc.Spec.InhibitRules[0].Equal)
		}
		if amc.Spec.Route.Receiver != "pager" || len(amc.Spec.Receivers) != 1 || amc.Spec.Receivers[0].Name != "pager" {
			t.Errorf("receiver %q, receivers %+v", amc.Spec.Route.Receiver, amc.Spec.Receivers)
		}
		cm, _ := has(&corev1.ConfigMap{}, "neighwatch-dashboard-neighwatch").(*corev1.ConfigMap)
		if cm == nil || cm.Namespace != "monitoring" || cm.Labels["grafana_dashboard"] != "1" || cm.Annotations["grafana_folder"] != "Networking" || cm.Data["neighwatch.json"] == "" {
			t.Errorf("dashboard ConfigMap %+v", cm)
		}
		d := has(&appsv1.DaemonSet{}, "neighwatch").(*appsv1.DaemonSet)
		c := d.Spec.Template.Spec.Containers[0]
		if !strings.Contains(c.Image, "@sha256:") || len(d.Spec.Template.Spec.ImagePullSecrets) != 1 || c.Args[len(c.Args)-1] != "--tracer.period=10s" {
			t.Errorf("image %s, pull secrets %v, args %v", c.Image, d.Spec.Template.Spec.ImagePullSecrets, c.Args)
		}
		cfg := has(&corev1.ConfigMap{}, "neighwatch-config").(*corev1.ConfigMap)
		if !strings.Contains(cfg.Data["config.yaml"], `remediation: "on"`) {
			t.Errorf("config.yaml %q: on must stay a string", cfg.Data["config.yaml"])
		}
	case "full":
		d := has(&appsv1.DaemonSet{}, "neighwatch").(*appsv1.DaemonSet)
		ps := d.Spec.Template.Spec
		c := ps.Containers[0]
		switch {
		case d.Namespace != "node-agents" || d.Labels["team"] != "network" || d.Annotations["example.com/owner"] != "network":
			t.Errorf("namespace %q, labels %v, annotations %v", d.Namespace, d.Labels, d.Annotations)
		case d.Spec.RevisionHistoryLimit == nil || *d.Spec.RevisionHistoryLimit != 3 || ps.TerminationGracePeriodSeconds == nil || *ps.TerminationGracePeriodSeconds != 45:
			t.Errorf("revisionHistoryLimit %v, terminationGracePeriodSeconds %v", d.Spec.RevisionHistoryLimit, ps.TerminationGracePeriodSeconds)
		case !strings.HasPrefix(c.Image, "mirror.example.com/neighwatch/neighwatch:"):
			t.Errorf("image %s: global.imageRegistry not applied", c.Image)
		case len(ps.ImagePullSecrets) != 2 || ps.ImagePullSecrets[0].Name != "global-pull" || ps.ImagePullSecrets[1].Name != "local-pull":
			t.Errorf("pull secrets %v", ps.ImagePullSecrets)
		case ps.SecurityContext == nil || ps.SecurityContext.RunAsUser == nil || ps.Affinity != nil:
			t.Errorf("pod securityContext %v, affinity %v", ps.SecurityContext, ps.Affinity)
		case len(c.Env) != 1 || len(ps.Volumes) != 3 || len(c.VolumeMounts) != 3 || c.Args[len(c.Args)-1] != "--web.config.file=/etc/neighwatch-web/web.yaml":
			t.Errorf("env %v, volumes %d, mounts %d, args %v", c.Env, len(ps.Volumes), len(c.VolumeMounts), c.Args)
		case c.ReadinessProbe.PeriodSeconds != 10 || c.ReadinessProbe.FailureThreshold != 6 || c.ReadinessProbe.HTTPGet.Path != "/readyz" ||
			c.ReadinessProbe.HTTPGet.Scheme != corev1.URISchemeHTTPS || len(c.ReadinessProbe.HTTPGet.HTTPHeaders) != 1 ||
			c.LivenessProbe.PeriodSeconds != 30 || c.LivenessProbe.HTTPGet.Path != "/healthz" || c.LivenessProbe.HTTPGet.Scheme != corev1.URISchemeHTTPS:
			t.Errorf("probes %+v, %+v", c.ReadinessProbe, c.LivenessProbe)
		case c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError:
			t.Errorf("terminationMessagePolicy %q", c.TerminationMessagePolicy)
		}
		svc, _ := has(&corev1.Service{}, "neighwatch").(*corev1.Service)
		if svc == nil || svc.Spec.Type != corev1.ServiceTypeNodePort || svc.Spec.ClusterIP != "" || svc.Spec.Ports[0].Port != 19947 ||
			svc.Labels["scrape"] != "yes" || svc.Annotations["example.com/scrape"] != "true" {
			t.Errorf("Service %+v", svc)
		}
		sm, _ := has(&monitoringv1.ServiceMonitor{}, "neighwatch").(*monitoringv1.ServiceMonitor)
		if sm == nil {
			t.Fatal("no ServiceMonitor")
		}
		ep := sm.Spec.Endpoints[0]
		if ep.ScrapeTimeout != "10s" || !ep.HonorLabels || ep.Scheme == nil || ep.TLSConfig == nil || ep.BasicAuth == nil ||
			len(ep.RelabelConfigs) != 3 || ep.RelabelConfigs[2].TargetLabel != "region" || len(ep.MetricRelabelConfigs) != 1 {
			t.Errorf("ServiceMonitor endpoint %+v", ep)
		}
		for k, o := range got {
			m := reflect.ValueOf(o).Elem().FieldByName("ObjectMeta").Interface().(metav1.ObjectMeta)
			if m.Namespace != "node-agents" || m.Labels["team"] != "network" {
				t.Errorf("%s: namespace %q, labels %v; want namespaceOverride and commonLabels", k, m.Namespace, m.Labels)
			}
		}
	case "minimal":
		for k := range got {
			if !strings.Contains(k, "DaemonSet") && !strings.Contains(k, "ConfigMap") {
				t.Errorf("%s rendered with everything optional off", k)
			}
		}
		d := has(&appsv1.DaemonSet{}, "neighwatch").(*appsv1.DaemonSet)
		if d.Spec.Template.Spec.PriorityClassName != "" || len(d.Spec.Template.Spec.Tolerations) != 0 {
			t.Errorf("priority class %q, tolerations %v", d.Spec.Template.Spec.PriorityClassName, d.Spec.Template.Spec.Tolerations)
		}
	}
}

func diffYAML(want, got any) string {
	w, _ := yaml.Marshal(want)
	g, _ := yaml.Marshal(got)
	wl, gl := strings.Split(string(w), "\n"), strings.Split(string(g), "\n")
	var b strings.Builder
	for i := 0; i < max(len(wl), len(gl)); i++ {
		var a, c string
		if i < len(wl) {
			a = wl[i]
		}
		if i < len(gl) {
			c = gl[i]
		}
		if a != c {
			fmt.Fprintf(&b, "- %s\n+ %s\n", a, c)
		}
	}
	return b.String()
}

// TestChartAlertmanagerConfigIsTheFiles: the chart's AlertmanagerConfig
// routes and inhibits as deploy/prometheus/alertmanager-route.yml and
// alertmanager-inhibit.yml do, which TestOnePagePerHost runs in the real
// Alertmanager: the same alerts, grouping, timings and equal labels.
func TestChartAlertmanagerConfigIsTheFiles(t *testing.T) {
	requireHelm(t)
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte("alertmanagerConfig:\n  enabled: true\n  receiver: pager\n  receivers: [{name: pager}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var amc *monitoringv1alpha1.AlertmanagerConfig
	for _, o := range render(t, values, true) {
		if a, ok := o.(*monitoringv1alpha1.AlertmanagerConfig); ok {
			amc = a
		}
	}
	if amc == nil {
		t.Fatal("no AlertmanagerConfig rendered")
	}
	var route struct {
		Routes []struct {
			Matchers       []string `json:"matchers"`
			GroupBy        []string `json:"group_by"`
			GroupWait      string   `json:"group_wait"`
			GroupInterval  string   `json:"group_interval"`
			RepeatInterval string   `json:"repeat_interval"`
		} `json:"routes"`
	}
	var inhibit struct {
		InhibitRules []struct {
			SourceMatchers []string `json:"source_matchers"`
			TargetMatchers []string `json:"target_matchers"`
			Equal          []string `json:"equal"`
		} `json:"inhibit_rules"`
	}
	if err := yaml.UnmarshalStrict(read(t, "deploy/prometheus/alertmanager-route.yml"), &route); err != nil || len(route.Routes) != 1 {
		t.Fatalf("alertmanager-route.yml: %v, %d routes", err, len(route.Routes))
	}
	if err := yaml.UnmarshalStrict(read(t, "deploy/prometheus/alertmanager-inhibit.yml"), &inhibit); err != nil || len(inhibit.InhibitRules) != 1 {
		t.Fatalf("alertmanager-inhibit.yml: %v, %d rules", err, len(inhibit.InhibitRules))
	}
	matchers := func(ms []monitoringv1alpha1.Matcher) []string {
		var out []string
		for _, m := range ms {
			out = append(out, fmt.Sprintf("%s%s%q", m.Name, m.MatchType, m.Value))
		}
		return out
	}
	dur := func(d *monitoringv1.NonEmptyDuration) string {
		if d == nil {
			return ""
		}
		return string(*d)
	}
	want, r := route.Routes[0], amc.Spec.Route
	if got := matchers(r.Matchers); !slices.Equal(got, want.Matchers) {
		t.Errorf("route matchers %q, the file's %q", got, want.Matchers)
	}
	if !slices.Equal(r.GroupBy, want.GroupBy) || dur(r.GroupWait) != want.GroupWait || dur(r.GroupInterval) != want.GroupInterval || dur(r.RepeatInterval) != want.RepeatInterval {
		t.Errorf("route by %v, %s/%s/%s; the file's by %v, %s/%s/%s", r.GroupBy, dur(r.GroupWait), dur(r.GroupInterval), dur(r.RepeatInterval),
			want.GroupBy, want.GroupWait, want.GroupInterval, want.RepeatInterval)
	}
	wi := inhibit.InhibitRules[0]
	if len(amc.Spec.InhibitRules) != 1 {
		t.Fatalf("%d inhibit rules", len(amc.Spec.InhibitRules))
	}
	ir := amc.Spec.InhibitRules[0]
	if got := matchers(ir.SourceMatch); !slices.Equal(got, wi.SourceMatchers) {
		t.Errorf("inhibition's sources %q, the file's %q", got, wi.SourceMatchers)
	}
	if got := matchers(ir.TargetMatch); !slices.Equal(got, wi.TargetMatchers) {
		t.Errorf("inhibition's targets %q, the file's %q", got, wi.TargetMatchers)
	}
	if !slices.Equal(ir.Equal, wi.Equal) {
		t.Errorf("inhibition's equal %v, the file's %v", ir.Equal, wi.Equal)
	}
}

// TestChartRollsForRestartKeysOnly: the pod template's checksum of the
// agent's configuration changes with a key the agent applies only at a
// start, so that helm upgrade rolls the pods, and not with a key it
// applies live (the remediation settings, the stale threshold), which
// reaches the running agents through the ConfigMap's volume.
func TestChartRollsForRestartKeysOnly(t *testing.T) {
	requireHelm(t)
	sum := func(config string) string {
		t.Helper()
		p := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(p, []byte("config:\n"+config), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, o := range render(t, p, false) {
			if ds, ok := o.(*appsv1.DaemonSet); ok {
				return ds.Spec.Template.Annotations["checksum/restart-config"]
			}
		}
		t.Fatal("no DaemonSet rendered")
		return ""
	}
	base := sum("  log.format: json\n")
	if base == "" {
		t.Fatal("the pod template has no checksum/restart-config")
	}
	for _, live := range []string{"  remediation: \"on\"\n", "  stale-threshold: 90s\n", "  manage.max: 10\n"} {
		if got := sum(live); got != base {
			t.Errorf("config %q (applied live) changes the pod template's checksum: the pods would roll for it", strings.TrimSpace(live))
		}
	}
	for _, restart := range []string{"  tracer.period: 10s\n", "  interfaces: [eth0]\n", "  exclude-interfaces: [flannel.*]\n"} {
		if got := sum(restart); got == base {
			t.Errorf("config %q (applied at a start only) leaves the pod template's checksum: the pods would keep running without it", strings.TrimSpace(restart))
		}
	}
}
