package manifests

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// CorpusDir holds values files an operator brings: copied from the
// node-exporter and Cilium charts' documented values, and this chart's
// own cases. Each starts with "# source:" and "# expect:" (renders, or
// refused: and a part of the one line that refuses it).
const CorpusDir = "internal/dev/manifests/testdata/values"

// corpusTable lists each file's outcome on both Helm versions; the test
// fails when it differs from the renders, and -update rewrites it.
const corpusTable = CorpusDir + "/README.md"

var update = flag.Bool("update", false, "rewrite "+corpusTable+" from the renders")

// Helms are the Helm versions an operator may run: the chart must render
// or refuse each values file alike on both.
var Helms = []string{HelmModule, Helm4Module}

// helmBins are the helm executables built by this test binary, by
// module, in helmDir, which TestMain removes.
var (
	helmBuild sync.Mutex
	helmBins  = map[string]string{}
	helmDir   string
)

// TestMain removes the helm executables the tests built (about 100 MB a
// test binary).
func TestMain(m *testing.M) {
	code := m.Run()
	if helmDir != "" {
		os.RemoveAll(helmDir)
	}
	os.Exit(code)
}

// helmAt builds module once per test binary and returns the
// executable's path.
func helmAt(t *testing.T, module string) string {
	t.Helper()
	helmBuild.Lock()
	defer helmBuild.Unlock()
	if p, ok := helmBins[module]; ok {
		return p
	}
	if helmDir == "" {
		d, err := os.MkdirTemp("", "neighwatch-helm-")
		if err != nil {
			t.Fatal(err)
		}
		helmDir = d
	}
	dir, err := os.MkdirTemp(helmDir, "")
	if err != nil {
		t.Fatal(err)
	}
	p, err := GoInstall(dir, module)
	if err != nil {
		t.Fatal(err)
	}
	helmBins[module] = p
	return p
}

type corpusFile struct {
	name, path, source, expect string
}

func readCorpus(t *testing.T) []corpusFile {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(root, CorpusDir, "*.yaml"))
	var files []corpusFile
	for _, p := range paths {
		b := read(t, filepath.Join(CorpusDir, filepath.Base(p)))
		lines := strings.SplitN(string(b), "\n", 3)
		src, ok1 := strings.CutPrefix(lines[0], "# source: ")
		exp, ok2 := strings.CutPrefix(lines[1], "# expect: ")
		if !ok1 || !ok2 || (exp != "renders" && !strings.HasPrefix(exp, "refused: ")) {
			t.Fatalf("%s: the first lines must be \"# source: ...\" and \"# expect: renders|refused: ...\"", p)
		}
		files = append(files, corpusFile{strings.TrimSuffix(filepath.Base(p), ".yaml"), filepath.Join(CorpusDir, filepath.Base(p)), src, exp})
	}
	// The chart's own ci/ files render too (TestChartRendersTheKustomization
	// checks what each asks).
	ci, _ := filepath.Glob(filepath.Join(root, ChartDir, "ci", "*-values.yaml"))
	for _, p := range ci {
		files = append(files, corpusFile{"ci/" + filepath.Base(p), filepath.Join(ChartDir, "ci", filepath.Base(p)), "the chart's ci/ values", "renders"})
	}
	return files
}

// refusalLine is the one line Helm prints for a refused render: a
// template's fail message, or the schema's complaint.
var refusalLine = regexp.MustCompile(`(?m)^Error: execution error at \([^)]*\): (.*)$|^- (at '[^']*': .*)$`)

// TestValuesCorpus renders every corpus file with Helm 3 and Helm 4: a
// file expected to render renders, every object decodes strictly into
// its API type, and the file's check (corpusChecks) holds; a file
// expected to be refused is refused by one line holding the expected
// words, the same line on both versions. The outcomes are corpusTable.
func TestValuesCorpus(t *testing.T) {
	requireHelm(t)
	files := readCorpus(t)
	if n := len(files) - len(slices.DeleteFunc(slices.Clone(files), func(f corpusFile) bool { return strings.HasPrefix(f.path, CorpusDir) })); n < 40 {
		t.Fatalf("%d files in %s, want at least 40", n, CorpusDir)
	}
	var mu sync.Mutex
	outcome := map[string]map[string]string{}  // file -> helm -> outcome
	rendered := map[string]map[string]string{} // file -> helm -> the render's lines but blank ones
	for _, f := range files {
		outcome[f.name] = map[string]string{}
		rendered[f.name] = map[string]string{}
	}
	for _, module := range Helms {
		helm := helmAt(t, module)
		version := module[strings.LastIndex(module, "@")+1:]
		t.Run(version, func(t *testing.T) {
			for _, f := range files {
				t.Run(f.name, func(t *testing.T) {
					t.Parallel()
					got, text := renderCorpus(t, helm, f)
					mu.Lock()
					outcome[f.name][version], rendered[f.name][version] = got, text
					mu.Unlock()
				})
			}
		})
	}
	if t.Failed() {
		return
	}
	// Helm 4 puts a blank line between objects; nothing else may differ.
	for _, f := range files {
		var texts []string
		for _, v := range rendered[f.name] {
			texts = append(texts, v)
		}
		if len(texts) == 2 && texts[0] != texts[1] {
			t.Errorf("%s: Helm 3 and Helm 4 render it otherwise", f.name)
		}
	}
	var b strings.Builder
	b.WriteString("# The values corpus\n\nValues files an operator brings to the chart, each rendered by `TestValuesCorpus` with Helm 3.21.4 and Helm 4.3.2 in `make test` (internal/dev/manifests): a render must decode strictly into the API types and pass the file's check, a refusal must be one line. Half and more are copied from the documented values of prometheus-community's node-exporter chart and Cilium's. Rewritten by `go test ./internal/dev/manifests -run TestValuesCorpus -update`.\n\n")
	refused := 0
	for _, f := range files {
		if strings.HasPrefix(f.expect, "refused") {
			refused++
		}
	}
	fmt.Fprintf(&b, "%d files: %d render, %d are refused.\n\n| file | from | outcome on both Helm versions |\n|---|---|---|\n", len(files), len(files)-refused, refused)
	for _, f := range files {
		var seen []string
		for _, v := range outcome[f.name] {
			if !slices.Contains(seen, v) {
				seen = append(seen, v)
			}
		}
		sort.Strings(seen)
		if len(seen) != 1 {
			t.Errorf("%s: the Helm versions differ: %q", f.name, outcome[f.name])
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", f.name, f.source, strings.ReplaceAll(strings.Join(seen, " / "), "|", `\|`))
	}
	if *update {
		if err := os.WriteFile(filepath.Join(root, corpusTable), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if have := read(t, corpusTable); !bytes.Equal(have, []byte(b.String())) {
		t.Errorf("%s differs from the renders: run go test ./internal/dev/manifests -run TestValuesCorpus -update, and read the diff\n%s", corpusTable, b.String())
	}
}

// renderCorpus renders one corpus file with helm and returns its outcome
// ("renders", or "refused: " and the line that refused it) and the
// render's lines but blank ones.
func renderCorpus(t *testing.T, helm string, f corpusFile) (string, string) {
	t.Helper()
	cmd := exec.Command(helm, "template", "neighwatch", ChartDir, "--namespace", "neighwatch", "--kube-version", KubeVersion,
		"--api-versions", "monitoring.coreos.com/v1", "--api-versions", "monitoring.coreos.com/v1alpha1",
		"--values", f.path)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		m := refusalLine.FindAllStringSubmatch(stderr.String(), -1)
		if len(m) != 1 {
			t.Fatalf("refused, but not by one line: %v\n%s", err, stderr.String())
		}
		line := m[0][1] + m[0][2]
		if want := strings.TrimPrefix(f.expect, "refused: "); f.expect == "renders" || !strings.Contains(line, want) {
			t.Errorf("expected %q; refused by: %s", f.expect, line)
		}
		return "refused: " + line, ""
	}
	if f.expect != "renders" {
		t.Fatalf("expected %q; it renders", f.expect)
	}
	got := map[string]any{}
	for _, doc := range strings.Split(stdout.String(), "\n---") {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		obj, err := Decode([]byte(doc + "\n"))
		if err != nil {
			t.Fatalf("an object does not decode strictly: %v\n%s", err, doc)
		}
		got[key(obj)] = obj
	}
	ds, _ := got["*v1.DaemonSet/neighwatch"].(*appsv1.DaemonSet)
	if ds == nil {
		t.Fatalf("no DaemonSet rendered: %v", slices.Sorted(maps.Keys(got)))
	}
	if strings.HasPrefix(f.name, "ci/") {
		lint := exec.Command(helm, "lint", "--strict", ChartDir, "--kube-version", KubeVersion, "--values", f.path)
		lint.Dir, lint.Env = root, cmd.Env
		if out, err := lint.CombinedOutput(); err != nil {
			t.Errorf("helm lint --strict: %v\n%s", err, out)
		}
	}
	if check := corpusChecks[f.name]; check != nil {
		check(t, ds, got)
	}
	var lines []string
	for _, l := range strings.Split(stdout.String(), "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	return "renders", strings.Join(lines, "\n")
}

// virtualTerms are the two expressions excludeVirtualNodes adds.
var virtualTerms = []corev1.NodeSelectorRequirement{
	{Key: "eks.amazonaws.com/compute-type", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"fargate"}},
	{Key: "type", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"virtual-kubelet"}},
}

// requiredTerms returns the DaemonSet's required node selector terms.
func requiredTerms(ds *appsv1.DaemonSet) []corev1.NodeSelectorTerm {
	a := ds.Spec.Template.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	return a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
}

// keepsVirtualNodesOut: every required term ends with the two
// exclusions.
func keepsVirtualNodesOut(t *testing.T, ds *appsv1.DaemonSet, terms int) {
	t.Helper()
	got := requiredTerms(ds)
	if len(got) != terms {
		t.Fatalf("%d required node selector terms, want %d: %+v", len(got), terms, got)
	}
	for i, term := range got {
		if e := term.MatchExpressions; len(e) < 2 || !reflect.DeepEqual(e[len(e)-2:], virtualTerms) {
			t.Errorf("term %d lacks the virtual-node exclusions: %+v", i, term)
		}
	}
}

func configFile(t *testing.T, got map[string]any) string {
	t.Helper()
	cm, _ := got["*v1.ConfigMap/neighwatch-config"].(*corev1.ConfigMap)
	if cm == nil {
		t.Fatal("no ConfigMap neighwatch-config")
	}
	return cm.Data["config.yaml"]
}

// keepsChartConfig: the chart's CNI exclusions and JSON logs are in the
// agent's config.
func keepsChartConfig(t *testing.T, got map[string]any) {
	t.Helper()
	cfg := configFile(t, got)
	for _, want := range []string{"exclude-interfaces:", "lxc.*", "cilium_.*", "log.format: json"} {
		if !strings.Contains(cfg, want) {
			t.Errorf("config.yaml lacks %q:\n%s", want, cfg)
		}
	}
}

// corpusChecks hold what a rendering corpus file must show beyond a
// strict decode, by file name.
var corpusChecks = map[string]func(t *testing.T, ds *appsv1.DaemonSet, got map[string]any){
	"ne-affinity-matchfields": func(t *testing.T, ds *appsv1.DaemonSet, _ map[string]any) {
		keepsVirtualNodesOut(t, ds, 1)
		if f := requiredTerms(ds)[0].MatchFields; len(f) != 1 || f[0].Key != "metadata.name" {
			t.Errorf("the term's matchFields %+v, want metadata.name's", f)
		}
	},
	"nw-affinity-own-terms": func(t *testing.T, ds *appsv1.DaemonSet, _ map[string]any) {
		keepsVirtualNodesOut(t, ds, 2)
		for i, role := range []string{"edge", "router"} {
			if e := requiredTerms(ds)[i].MatchExpressions; e[0].Key != "node-role.kubernetes.io/"+role {
				t.Errorf("term %d starts %+v, want the values' node-role.kubernetes.io/%s", i, e[0], role)
			}
		}
	},
	"cilium-affinity": func(t *testing.T, ds *appsv1.DaemonSet, _ map[string]any) {
		keepsVirtualNodesOut(t, ds, 1)
		if a := ds.Spec.Template.Spec.Affinity.PodAntiAffinity; a == nil || len(a.RequiredDuringSchedulingIgnoredDuringExecution) != 1 {
			t.Errorf("podAntiAffinity %+v, want the values'", a)
		}
	},
	"nw-excludevirtualnodes-off": func(t *testing.T, ds *appsv1.DaemonSet, _ map[string]any) {
		if a := ds.Spec.Template.Spec.Affinity; a != nil {
			t.Errorf("affinity %+v with excludeVirtualNodes false and none given", a)
		}
	},
	"ne-tolerations": func(t *testing.T, ds *appsv1.DaemonSet, _ map[string]any) {
		want := []corev1.Toleration{{Effect: corev1.TaintEffectNoSchedule, Operator: corev1.TolerationOpExists}}
		if got := ds.Spec.Template.Spec.Tolerations; !reflect.DeepEqual(got, want) {
			t.Errorf("tolerations %+v", got)
		}
	},
	"ne-revisionhistorylimit": func(t *testing.T, ds *appsv1.DaemonSet, _ map[string]any) {
		if r := ds.Spec.RevisionHistoryLimit; r == nil || *r != 10 {
			t.Errorf("revisionHistoryLimit %v, want 10", r)
		}
	},
	"nw-zeros": func(t *testing.T, ds *appsv1.DaemonSet, _ map[string]any) {
		r, g := ds.Spec.RevisionHistoryLimit, ds.Spec.Template.Spec.TerminationGracePeriodSeconds
		if r == nil || *r != 0 || g == nil || *g != 0 {
			t.Errorf("revisionHistoryLimit %v, terminationGracePeriodSeconds %v: want both 0", r, g)
		}
	},
	"ne-terminationgrace-null": func(t *testing.T, ds *appsv1.DaemonSet, _ map[string]any) {
		if g := ds.Spec.Template.Spec.TerminationGracePeriodSeconds; g != nil {
			t.Errorf("terminationGracePeriodSeconds %d from null", *g)
		}
	},
	"cilium-terminationgrace": func(t *testing.T, ds *appsv1.DaemonSet, _ map[string]any) {
		if g := ds.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || *g != 1 {
			t.Errorf("terminationGracePeriodSeconds %v, want 1", g)
		}
	},
	"ne-commonlabels": func(t *testing.T, ds *appsv1.DaemonSet, got map[string]any) {
		if ds.Spec.Template.Labels["team"] != "network" || ds.Labels["team"] != "network" {
			t.Errorf("pod labels %v, DaemonSet labels %v: want team=network on both", ds.Spec.Template.Labels, ds.Labels)
		}
	},
	"ne-podannotations": func(t *testing.T, ds *appsv1.DaemonSet, _ map[string]any) {
		if ds.Spec.Template.Annotations["cluster-autoscaler.kubernetes.io/safe-to-evict"] != "true" {
			t.Errorf("pod annotations %v", ds.Spec.Template.Annotations)
		}
	},
	"ne-hostnetwork-only": func(t *testing.T, ds *appsv1.DaemonSet, _ map[string]any) {
		if s := ds.Spec.Template.Spec; !s.HostNetwork || s.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
			t.Errorf("hostNetwork %v, dnsPolicy %q", s.HostNetwork, s.DNSPolicy)
		}
	},
	"ne-global-pullsecrets": func(t *testing.T, ds *appsv1.DaemonSet, _ map[string]any) {
		want := []corev1.LocalObjectReference{{Name: "pullSecret1"}, {Name: "pullSecret2"}}
		if got := ds.Spec.Template.Spec.ImagePullSecrets; !reflect.DeepEqual(got, want) {
			t.Errorf("imagePullSecrets %+v", got)
		}
	},
	"nw-extraargs-keeps-config": func(t *testing.T, ds *appsv1.DaemonSet, got map[string]any) {
		if a := ds.Spec.Template.Spec.Containers[0].Args; a[len(a)-1] != "--tracer.period=10s" {
			t.Errorf("args %v, want --tracer.period=10s last", a)
		}
		keepsChartConfig(t, got)
	},
	"cilium-extraargs": func(t *testing.T, ds *appsv1.DaemonSet, got map[string]any) {
		keepsChartConfig(t, got)
	},
	"nw-exclude-adds": func(t *testing.T, _ *appsv1.DaemonSet, got map[string]any) {
		keepsChartConfig(t, got)
		if cfg := configFile(t, got); !strings.Contains(cfg, "- flannel.*") {
			t.Errorf("config.yaml lacks the values' exclusion:\n%s", cfg)
		}
	},
	"nw-exclude-replaces": func(t *testing.T, _ *appsv1.DaemonSet, got map[string]any) {
		if cfg := configFile(t, got); !strings.Contains(cfg, "exclude-interfaces:\n- eth9\n") || strings.Contains(cfg, "lxc.*") {
			t.Errorf("config.yaml does not hold the values' exclusions alone:\n%s", cfg)
		}
	},
	"ne-extrahostvolume-done-right": func(t *testing.T, ds *appsv1.DaemonSet, _ map[string]any) {
		c := ds.Spec.Template.Spec.Containers[0]
		if m := c.VolumeMounts[len(c.VolumeMounts)-1]; m.Name != "textfile" || m.MountPath != "/run/prometheus" || !m.ReadOnly {
			t.Errorf("the last mount %+v, want the values' textfile", m)
		}
	},
	"cilium-extracontainers": func(t *testing.T, ds *appsv1.DaemonSet, _ map[string]any) {
		if cs := ds.Spec.Template.Spec.Containers; len(cs) != 2 || cs[1].Name != "log-shipper" {
			t.Errorf("containers %d, want the agent and the values' log-shipper", len(cs))
		}
	},
	"ne-dnsconfig": func(t *testing.T, ds *appsv1.DaemonSet, _ map[string]any) {
		if d := ds.Spec.Template.Spec.DNSConfig; d == nil || len(d.Options) != 1 || d.Options[0].Name != "ndots" {
			t.Errorf("dnsConfig %+v, want the values'", d)
		}
	},
	"calico-minreadyseconds": func(t *testing.T, ds *appsv1.DaemonSet, _ map[string]any) {
		if ds.Spec.MinReadySeconds != 10 {
			t.Errorf("minReadySeconds %d, want 10", ds.Spec.MinReadySeconds)
		}
	},
	"ne-probe-null": func(t *testing.T, ds *appsv1.DaemonSet, _ map[string]any) {
		if p := ds.Spec.Template.Spec.Containers[0].LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.PeriodSeconds != 0 {
			t.Errorf("livenessProbe %+v, want the chart's /healthz with Kubernetes' timings", p)
		}
	},
	"ne-monitor-namespace": func(t *testing.T, _ *appsv1.DaemonSet, got map[string]any) {
		var pm *monitoringv1.PodMonitor
		for _, o := range got {
			if p, ok := o.(*monitoringv1.PodMonitor); ok {
				pm = p
			}
		}
		if pm == nil || pm.Namespace != "monitoring" || !slices.Equal(pm.Spec.NamespaceSelector.MatchNames, []string{"neighwatch"}) ||
			pm.Annotations["example.com/owner"] != "sre" {
			t.Errorf("the PodMonitor %+v, want it in monitoring, selecting the agents in neighwatch, annotated", pm)
		}
	},
	"nw-config-merge": func(t *testing.T, ds *appsv1.DaemonSet, got map[string]any) {
		keepsChartConfig(t, got)
		if cfg := configFile(t, got); !strings.Contains(cfg, "stale-threshold: 90s") || !strings.Contains(cfg, "remediation: dry-run") {
			t.Errorf("config.yaml lacks the values' stale-threshold or the chart's remediation:\n%s", cfg)
		}
	},
	"nw-runasuser-root-wins": func(t *testing.T, ds *appsv1.DaemonSet, _ map[string]any) {
		if u := ds.Spec.Template.Spec.Containers[0].SecurityContext.RunAsUser; u == nil || *u != 0 {
			t.Errorf("the container's runAsUser %v, want 0", u)
		}
	},
	"cilium-privileged": func(t *testing.T, ds *appsv1.DaemonSet, _ map[string]any) {
		sc := ds.Spec.Template.Spec.Containers[0].SecurityContext
		if sc.Privileged == nil || !*sc.Privileged || sc.AllowPrivilegeEscalation != nil {
			t.Errorf("privileged %v, allowPrivilegeEscalation %v: want true and unset", sc.Privileged, sc.AllowPrivilegeEscalation)
		}
	},
	"nw-capabilities-reduced": func(t *testing.T, ds *appsv1.DaemonSet, _ map[string]any) {
		c := ds.Spec.Template.Spec.Containers[0].SecurityContext.Capabilities
		if !slices.Equal(c.Add, []corev1.Capability{"NET_ADMIN", "NET_RAW"}) || !slices.Equal(c.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("capabilities %+v", c)
		}
	},
	"nw-jobselector-matching": func(t *testing.T, _ *appsv1.DaemonSet, got map[string]any) {
		pr, _ := got["*v1.PrometheusRule/neighwatch"].(*monitoringv1.PrometheusRule)
		if pr == nil {
			t.Fatal("no PrometheusRule")
		}
		for _, r := range pr.Spec.Groups[0].Rules {
			if e := r.Expr.String(); strings.Contains(e, "neighwatch_") && !strings.Contains(e, `{job=~"neighwatch|node-neighbours", namespace="neighwatch", region!="lab"`) {
				t.Errorf("%s: %s does not carry the values' selector", r.Alert, e)
			}
		}
	},
}

// ruleCases are the corpus files that hold the chart's rules in the rule
// ledger (docs/rules.md, The chart): TestChartRuleCases renders them
// alone, with Helm 4, so that each break of a chart rule costs seconds,
// not the whole corpus on two Helm versions (TestValuesCorpus runs them
// all in make test).
var ruleCases = []string{
	"ne-securitycontext", "ne-securitycontext-as-pod", "nw-runasuser-container", "nw-affinity-own-terms", "ne-affinity-matchfields",
	"nw-jobselector-regex-other", "nw-jobselector-matching", "nw-relabel-job", "cilium-capabilities", "nw-config-threshold-zero",
	"nw-exclude-adds", "nw-exclude-replaces", "cilium-updatestrategy-quoted", "kps-runbookurl-case", "kps-config-camelcase",
}

// TestChartRuleCases renders the corpus files of ruleCases with Helm 4
// as TestValuesCorpus does: each renders with its check, or is refused
// by the one line it expects.
func TestChartRuleCases(t *testing.T) {
	requireHelm(t)
	helm := helmAt(t, Helm4Module)
	byName := map[string]corpusFile{}
	for _, f := range readCorpus(t) {
		byName[f.name] = f
	}
	for _, name := range ruleCases {
		f, ok := byName[name]
		if !ok {
			t.Fatalf("no corpus file %s", name)
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			renderCorpus(t, helm, f)
		})
	}
}
