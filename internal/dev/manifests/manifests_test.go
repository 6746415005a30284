package manifests

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

const root = "../../.."

func read(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestKustomizationDecodesStrictly decodes every resource of the
// kustomization into its API type, unknown fields being errors, and
// checks that every manifest in the folder is listed and in the
// neighwatch namespace.
func TestKustomizationDecodesStrictly(t *testing.T) {
	obj, err := Decode(read(t, KubeDir+"/kustomization.yaml"))
	if err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	k := obj.(*Kustomization)
	files, _ := filepath.Glob(filepath.Join(root, KubeDir, "*.yaml"))
	for _, f := range files {
		if name := filepath.Base(f); name != "kustomization.yaml" && !slices.Contains(k.Resources, name) {
			t.Errorf("%s is not in kustomization.yaml's resources", name)
		}
	}
	kinds := map[string]bool{}
	for _, res := range k.Resources {
		obj, err := Decode(read(t, KubeDir+"/"+res))
		if err != nil {
			t.Errorf("%s: %v", res, err)
			continue
		}
		switch o := obj.(type) {
		case *corev1.Namespace:
			kinds["Namespace"] = true
			if o.Name != k.Namespace {
				t.Errorf("%s: namespace %q, kustomization says %q", res, o.Name, k.Namespace)
			}
		case *appsv1.DaemonSet:
			kinds["DaemonSet"] = true
			if o.Namespace != k.Namespace {
				t.Errorf("%s: in namespace %q", res, o.Namespace)
			}
		case *corev1.Service:
			kinds["Service"] = true
		case *monitoringv1.PodMonitor:
			kinds["PodMonitor"] = true
		case *monitoringv1.PrometheusRule:
			kinds["PrometheusRule"] = true
		}
	}
	for _, want := range []string{"Namespace", "DaemonSet", "Service", "PodMonitor", "PrometheusRule"} {
		if !kinds[want] {
			t.Errorf("the kustomization has no %s", want)
		}
	}
}

// TestStrictDecodingCatchesTypos: the decoding above can fail.
func TestStrictDecodingCatchesTypos(t *testing.T) {
	ds := read(t, KubeDir+"/daemonset.yaml")
	for _, c := range []struct{ from, to string }{
		{"readOnlyRootFilesystem:", "readOnlyRootFileSystem:"},
		{"hostNetwork: true", "hostNetwork: true\n      hostNetwork: false"},
		{"containerPort: 9947", "containerPort: \"9947\""},
	} {
		bad := bytes.Replace(ds, []byte(c.from), []byte(c.to), 1)
		if bytes.Equal(bad, ds) {
			t.Fatalf("%q is not in daemonset.yaml", c.from)
		}
		if _, err := Decode(bad); err == nil {
			t.Errorf("a DaemonSet with %q decoded without error", c.to)
		}
	}
}

// TestPrometheusRuleInSync: prometheusrule.yaml is what alerts.yml
// generates (make manifests).
func TestPrometheusRuleInSync(t *testing.T) {
	version, err := Version(root)
	if err != nil {
		t.Fatal(err)
	}
	want, err := PrometheusRule(read(t, AlertsFile), version)
	if err != nil {
		t.Fatal(err)
	}
	if got := read(t, RuleFile); !bytes.Equal(got, want) {
		t.Fatalf("%s differs from what %s generates: run make manifests", RuleFile, AlertsFile)
	}
	// And the generated object holds every alert.
	var spec struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(read(t, AlertsFile), &spec); err != nil {
		t.Fatal(err)
	}
	for _, g := range spec.Groups {
		for _, r := range g.Rules {
			if !bytes.Contains(want, []byte("alert: "+r.Alert+"\n")) {
				t.Errorf("the PrometheusRule lacks %s", r.Alert)
			}
		}
	}
}

// TestImageIsVersion: the DaemonSet runs the image make image tags, whose
// tag is the VERSION file, never latest.
func TestImageIsVersion(t *testing.T) {
	v, err := Version(root)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(v) {
		t.Fatalf("VERSION %q is not MAJOR.MINOR.PATCH", v)
	}
	ds, err := DaemonSet(root)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ds.Spec.Template.Spec.Containers[0].Image, Image+":"+v; got != want {
		t.Fatalf("the DaemonSet runs %s, make image builds %s", got, want)
	}
	if !bytes.Contains(read(t, "CHANGELOG.md"), []byte("\n## ["+v+"] - ")) {
		t.Errorf("CHANGELOG.md has no section for %s", v)
	}
}

// TestAlertsHaveRunbooks: every alert links to a section of
// docs/runbook.md that exists.
func TestAlertsHaveRunbooks(t *testing.T) {
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert       string            `json:"alert"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(read(t, AlertsFile), &rules); err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, l := range strings.Split(string(read(t, "docs/runbook.md")), "\n") {
		if h, ok := strings.CutPrefix(l, "## "); ok {
			anchors[strings.ToLower(strings.ReplaceAll(strings.TrimSpace(h), " ", "-"))] = true
		}
	}
	const prefix = "https://github.com/neighwatch/neighwatch/blob/main/docs/runbook.md#"
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			u := r.Annotations["runbook_url"]
			anchor, ok := strings.CutPrefix(u, prefix)
			if !ok || !anchors[anchor] {
				t.Errorf("%s: runbook_url %q is not a section of docs/runbook.md", r.Alert, u)
			}
		}
	}
	if n == 0 {
		t.Fatal("no alerts read")
	}
}

// TestPrivileges: the DaemonSet's and the systemd unit's privileges read
// from the files themselves, and what the kernel matrix runs the agent
// under.
func TestPrivileges(t *testing.T) {
	ds, err := DaemonSetPrivileges("../../..")
	if err != nil {
		t.Fatal(err)
	}
	sd, err := SystemdPrivileges("../../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []Privileges{ds, sd} {
		for _, c := range []string{"NET_ADMIN", "NET_RAW", "BPF", "PERFMON", "SYS_RESOURCE"} {
			if !slices.Contains(p.Caps, c) {
				t.Errorf("%s lacks %s", p, c)
			}
		}
		if !p.NoNewPrivs || p.MemlockBytes != 64<<10 {
			t.Errorf("%s: want no_new_privs and memlock 64 KiB", p)
		}
	}
	want := []string{"prlimit", "--memlock=65536:65536", "--", "setpriv",
		"--bounding-set=-all,+net_admin,+net_raw,+bpf,+perfmon,+sys_resource", "--no-new-privs", "--", "neighwatch", "agent"}
	if got := ds.Wrap("neighwatch", "agent"); !slices.Equal(got, want) {
		t.Errorf("Wrap:\n%q\nwant\n%q", got, want)
	}
}

// TestMakefilePinsTheTools: the Makefile runs the helm, oras and cosign
// the tests run (the constants), and the chart's tests render with the
// same Helm 3.
func TestMakefilePinsTheTools(t *testing.T) {
	mk := string(read(t, "Makefile"))
	for name, module := range map[string]string{"HELM": HelmModule, "ORAS": OrasModule, "COSIGN": CosignModule} {
		if !regexp.MustCompile(`(?m)^` + name + `\s+:= ` + regexp.QuoteMeta(module) + `$`).MatchString(mk) {
			t.Errorf("the Makefile's %s is not %s", name, module)
		}
	}
	if Helms[0] != HelmModule {
		t.Errorf("the corpus renders with %s first, the Makefile's helm is %s", Helms[0], HelmModule)
	}
}
