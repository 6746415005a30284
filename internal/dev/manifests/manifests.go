package manifests

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	monitoringv1alpha1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Paths inside the repository.
const (
	AlertsFile    = "deploy/prometheus/alerts.yml"
	DashboardFile = "deploy/grafana/neighwatch.json"
	RuleFile      = "deploy/kubernetes/prometheusrule.yaml"
	KubeDir       = "deploy/kubernetes"
	ChartDir      = "deploy/helm/neighwatch"
	Image         = "ghcr.io/neighwatch/neighwatch"
)

// HelmModule is the helm the Makefile and the tests run, pinned (go run).
// OrasModule and CosignModule are make publish's, which the publish test
// runs too. TestMakefilePinsTheTools holds the Makefile's pins to these.
const (
	HelmModule   = "helm.sh/helm/v3/cmd/helm@v3.21.4"
	Helm4Module  = "helm.sh/helm/v4/cmd/helm@v4.3.2"
	OrasModule   = "oras.land/oras/cmd/oras@v1.3.6"
	CosignModule = "github.com/sigstore/cosign/v3/cmd/cosign@v3.1.3"
)

// GoInstall builds module (path@version of a main package) into dir and
// returns the executable's path; Go's build cache keeps the build across
// runs.
func GoInstall(dir, module string) (string, error) {
	cmd := exec.Command("go", "install", module)
	cmd.Env = append(os.Environ(), "GOBIN="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install %s: %w\n%s", module, err, out)
	}
	path, _, _ := strings.Cut(module, "@")
	return filepath.Join(dir, filepath.Base(path)), nil
}

// KubeVersion is the Kubernetes the tests render the chart for: the
// oldest its kubeVersion allows (1.30: the container's appArmorProfile).
const KubeVersion = "1.30.0"

// ChartCopies are the files the chart carries as copies (a chart cannot
// read outside its folder): chart path -> source, kept by make manifests
// and a test.
var ChartCopies = map[string]string{
	ChartDir + "/files/alerts.yml": AlertsFile,
}

// ruleHeader starts the generated PrometheusRule.
const ruleHeader = `# Generated from deploy/prometheus/alerts.yml by "make manifests"; do not
# edit: change the rule file and regenerate (a test fails on drift).
`

// PrometheusRule turns a Prometheus rule file into the PrometheusRule
// object prometheus-operator loads, in YAML, labelled as the chart labels
// it for version. Unknown fields in the rule file are errors.
func PrometheusRule(alerts []byte, version string) ([]byte, error) {
	var spec monitoringv1.PrometheusRuleSpec
	if err := strict(alerts, &spec); err != nil {
		return nil, fmt.Errorf("%s: %w", AlertsFile, err)
	}
	r := monitoringv1.PrometheusRule{
		TypeMeta: metav1.TypeMeta{APIVersion: "monitoring.coreos.com/v1", Kind: "PrometheusRule"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      "neighwatch",
			Namespace: "neighwatch",
			Labels: map[string]string{"app.kubernetes.io/name": "neighwatch", "app.kubernetes.io/instance": "neighwatch",
				"app.kubernetes.io/version": version},
		},
		Spec: spec,
	}
	b, err := yaml.Marshal(r)
	if err != nil {
		return nil, err
	}
	// ObjectMeta's zero creation time marshals as null; the API server
	// fills it in.
	b = bytes.Replace(b, []byte("  creationTimestamp: null\n"), nil, 1)
	return append([]byte(ruleHeader), b...), nil
}

// Kustomization is the part of kustomization.yaml the project uses; other
// fields are errors.
type Kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace"`
	Resources  []string `json:"resources"`
}

// Decode decodes one manifest strictly into the API type of its kind:
// unknown or duplicate fields are errors, as a strict API server makes
// them.
func Decode(data []byte) (any, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(data, &tm); err != nil {
		return nil, err
	}
	var obj any
	switch tm.APIVersion + "/" + tm.Kind {
	case "v1/Namespace":
		obj = &corev1.Namespace{}
	case "v1/Service":
		obj = &corev1.Service{}
	case "v1/ConfigMap":
		obj = &corev1.ConfigMap{}
	case "v1/ResourceQuota":
		obj = &corev1.ResourceQuota{}
	case "apps/v1/DaemonSet":
		obj = &appsv1.DaemonSet{}
	case "monitoring.coreos.com/v1/PodMonitor":
		obj = &monitoringv1.PodMonitor{}
	case "monitoring.coreos.com/v1/ServiceMonitor":
		obj = &monitoringv1.ServiceMonitor{}
	case "monitoring.coreos.com/v1/PrometheusRule":
		obj = &monitoringv1.PrometheusRule{}
	case "monitoring.coreos.com/v1alpha1/AlertmanagerConfig":
		obj = &monitoringv1alpha1.AlertmanagerConfig{}
	case "kustomize.config.k8s.io/v1beta1/Kustomization":
		obj = &Kustomization{}
	default:
		return nil, fmt.Errorf("unknown kind %q of apiVersion %q", tm.Kind, tm.APIVersion)
	}
	if err := strict(data, obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// strict decodes YAML as the API server decodes a strict request: field
// names match exactly (encoding/json would take any case), and unknown or
// duplicate fields are errors.
func strict(data []byte, obj any) error {
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return err
	}
	strictErrs, err := kjson.UnmarshalStrict(j, obj)
	if err != nil {
		return err
	}
	return errors.Join(strictErrs...)
}

// DaemonSet reads the agent's DaemonSet from the repository at root.
func DaemonSet(root string) (*appsv1.DaemonSet, error) {
	b, err := os.ReadFile(filepath.Join(root, KubeDir, "daemonset.yaml"))
	if err != nil {
		return nil, err
	}
	obj, err := Decode(b)
	if err != nil {
		return nil, fmt.Errorf("daemonset.yaml: %w", err)
	}
	ds, ok := obj.(*appsv1.DaemonSet)
	if !ok {
		return nil, fmt.Errorf("daemonset.yaml holds a %T", obj)
	}
	return ds, nil
}

// ConfigMapData returns the data of the ConfigMap called name among the
// manifests of the repository at root.
func ConfigMapData(root, name string) (map[string]string, error) {
	files, err := filepath.Glob(filepath.Join(root, KubeDir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		obj, err := Decode(b)
		if err != nil {
			continue
		}
		if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Name == name {
			return cm.Data, nil
		}
	}
	return nil, fmt.Errorf("no ConfigMap %s in %s", name, KubeDir)
}

// Version reads the VERSION file at root.
func Version(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}
