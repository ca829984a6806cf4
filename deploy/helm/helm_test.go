package helm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/slicemeter/slicemeter/deploy/local"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/e2e/apptest"
)

const root = "../.."

// TestMain removes the slicemeter that apptest.Binary builds and stops localtest's shared
// servers.
func TestMain(m *testing.M) { apptest.Main(m) }

const regenerate = "run `go generate ./deploy/helm` (or `make chart`)"

// TestChartFilesFresh: the chart's copies of the rules and dashboards are those of alerts/ and
// dashboards/json, byte for byte, and nothing else.
func TestChartFilesFresh(t *testing.T) {
	stale, err := Stale(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stale {
		t.Errorf("%s: %s", s, regenerate)
	}
}

// TestStaleNoticesChanges: Stale sees a changed copy, a missing one and an extra file.
func TestStaleNoticesChanges(t *testing.T) {
	tmp := t.TempDir()
	for _, dir := range []string{"alerts", "dashboards/json"} {
		if err := os.CopyFS(filepath.Join(tmp, dir), os.DirFS(filepath.Join(root, dir))); err != nil {
			t.Fatal(err)
		}
	}
	if err := Sync(tmp); err != nil {
		t.Fatal(err)
	}
	if stale, err := Stale(tmp); err != nil || len(stale) != 0 {
		t.Fatalf("right after Sync: %v, %v", stale, err)
	}
	files := filepath.Join(tmp, ChartDir, "files")
	if err := os.WriteFile(filepath.Join(files, "alerts", "slicemeter.rules.yml"), []byte("groups: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(files, "dashboards", "fleet.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(files, "dashboards", "old.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	stale, err := Stale(tmp)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(stale, "\n")
	for _, want := range []string{"slicemeter.rules.yml differs", "fleet.json differs", "old.json has no source"} {
		if !strings.Contains(got, want) {
			t.Errorf("Stale() = %q, lacks %q", got, want)
		}
	}
}

func helmBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: not building helm")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	bin, err := local.HelmBinary(ctx, nil)
	if err != nil {
		t.Fatalf("building helm (see deploy/local/install-deps.sh): %v", err)
	}
	return bin
}

// required are the values the chart has no default for (the plain manifests' examples).
var required = []string{"-f", filepath.Join(root, ManifestsValues)}

// template renders the chart with the required values, then args.
func template(t *testing.T, helm string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := Template(ctx, helm, root, append(slices.Clone(required), args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestManifestsFresh: deploy/kubernetes holds the chart rendered with ManifestsValues, its
// prometheus-operator objects apart.
func TestManifestsFresh(t *testing.T) {
	helm := helmBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for file, render := range map[string]func(context.Context, string, string) ([]byte, error){ManifestsFile: Manifests, MonitoringFile: Monitoring} {
		want, err := render(ctx, helm, root)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatalf("%v: %s", err, regenerate)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: %s", file, regenerate)
		}
	}
}

// TestPlainTemplate: helm template with nothing but the required values renders, whatever
// Kubernetes version helm assumes (no --kube-version: v1.20.0 for a helm built from source,
// which the chart's kubeVersion ">=1.25.0-0" refused), and without prometheus-operator's
// objects, which a cluster without their CRDs would refuse.
func TestPlainTemplate(t *testing.T) {
	helm := helmBinary(t)
	args := append([]string{"template", Release, filepath.Join(root, ChartDir)}, required...)
	out, err := exec.Command(helm, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	objs := parse(t, out)
	if len(filter(objs, "DaemonSet", "Deployment")) != 3 || len(filter(objs, "ServiceMonitor", "PrometheusRule")) != 0 {
		t.Errorf("rendered %d workloads and %d prometheus-operator objects, want 3 and none", len(filter(objs, "DaemonSet", "Deployment")), len(filter(objs, "ServiceMonitor", "PrometheusRule")))
	}
}

// TestRequiredValues: the chart has no default for what it cannot guess (the brokers, the DSN,
// the API auth Secret; placeholders would install and fail at run time): a render without
// them fails naming every one at once.
func TestRequiredValues(t *testing.T) {
	helm := helmBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := Template(ctx, helm, root)
	if err == nil {
		t.Fatal("helm template without values rendered; want the required values named")
	}
	for _, want := range []string{"kafka.brokers is required", "clickhouse.dsn or clickhouse.dsnSecret is required", "attribution.auth: set existingSecret or content"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q:\n%v", want, err)
		}
	}
	// One of them given: the others are still named.
	_, err = Template(ctx, helm, root, "--set", "kafka.brokers=kafka-0.kafka:9092")
	if err == nil || strings.Contains(err.Error(), "kafka.brokers is required") || !strings.Contains(err.Error(), "clickhouse.dsn or clickhouse.dsnSecret is required") {
		t.Errorf("with the brokers given: %v; want the DSN and auth named, not the brokers", err)
	}
}

// TestMonitoringObjectsFollowTheCluster: ServiceMonitors and the PrometheusRule are rendered
// where the cluster has prometheus-operator's CRDs (helm install reads them from the API
// server; helm template from --api-versions) or where asked for, never otherwise.
func TestMonitoringObjectsFollowTheCluster(t *testing.T) {
	helm := helmBinary(t)
	crds := []string{"--api-versions", "monitoring.coreos.com/v1/ServiceMonitor", "--api-versions", "monitoring.coreos.com/v1/PrometheusRule"}
	for _, tc := range []struct {
		name            string
		args            []string
		monitors, rules int
	}{
		{"no CRDs", nil, 0, 0},
		{"the CRDs", crds, 3, 1},
		{"the group version", []string{"--api-versions", "monitoring.coreos.com/v1"}, 3, 1},
		{"only the ServiceMonitor CRD", crds[:2], 3, 0},
		{"asked for without CRDs", []string{"--set", "serviceMonitor.enabled=true", "--set", "prometheusRule.enabled=true"}, 3, 1},
		{"turned off with the CRDs", append([]string{"--set", "serviceMonitor.enabled=false", "--set", "prometheusRule.enabled=false"}, crds...), 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := parse(t, template(t, helm, tc.args...))
			if m, r := len(filter(objs, "ServiceMonitor")), len(filter(objs, "PrometheusRule")); m != tc.monitors || r != tc.rules {
				t.Errorf("%d ServiceMonitors and %d PrometheusRules, want %d and %d", m, r, tc.monitors, tc.rules)
			}
		})
	}
}

// TestHelmLint: helm lint --strict finds nothing, with the required values and with every
// option on.
func TestHelmLint(t *testing.T) {
	helm := helmBinary(t)
	for _, values := range []string{"manifests.values.yaml", "testdata/all.values.yaml"} {
		args := []string{"lint", "--strict", "--kube-version", KubeVersion, filepath.Join(root, ChartDir)}
		if values != "" {
			args = append(args, "-f", values)
		}
		out, err := exec.Command(helm, args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "0 chart(s) failed") || strings.Contains(string(out), "[WARNING]") {
			t.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestBadValues: values the chart cannot honour fail the render with what is wrong.
func TestBadValues(t *testing.T) {
	helm := helmBinary(t)
	for _, tc := range []struct {
		name string
		set  []string
		want string
	}{
		{"sasl mechanism", []string{"kafka.sasl.mechanism=gssapi", "kafka.sasl.username=u", "kafka.sasl.passwordSecret=s"}, "at '/kafka/sasl/mechanism'"},
		{"sasl without user", []string{"kafka.sasl.mechanism=plain", "kafka.sasl.passwordSecret=s"}, "kafka.sasl.username is required"},
		{"sasl without password", []string{"kafka.sasl.mechanism=plain", "kafka.sasl.username=u"}, "kafka.sasl.passwordSecret is required"},
		{"no api auth", []string{"attribution.auth.existingSecret="}, "attribution.auth: set existingSecret or content"},
		{"no brokers", []string{"kafka.brokers="}, "kafka.brokers is required"},
		{"no price book", []string{"pricebook.content="}, "pricebook.content or pricebook.existingConfigMap is required"},
		{"both pdb bounds", []string{"attribution.pdb.minAvailable=1"}, "attribution.pdb: set minAvailable or maxUnavailable, not both"},
		{"no clickhouse", []string{"clickhouse.dsn="}, "clickhouse.dsn or clickhouse.dsnSecret is required"},
		// The exporter would publish every unlabelled pod at a tier attribution cannot price.
		{"default tier not in the price book", []string{"exporter.kubernetes.defaultTier=gold"},
			`exporter.kubernetes.defaultTier "gold": not a tier of pricebook.content (default)`},
		{"no default tier", []string{"exporter.kubernetes.defaultTier="}, "exporter.kubernetes.defaultTier is required"},
		{"price book without tiers", []string{"pricebook.content=version: 1"},
			`exporter.kubernetes.defaultTier "default": not a tier of pricebook.content (none)`},
		{"price book not YAML", []string{"pricebook.content=tiers: [a"}, "pricebook.content: not YAML"},
		// values.schema.json: unknown keys and wrong types are refused, naming the value.
		{"unknown key", []string{"exporter.resourcez.x=1"}, "at '/exporter': additional properties 'resourcez' not allowed"},
		{"unknown top-level key", []string{"colector.replicas=3"}, "additional properties 'colector' not allowed"},
		{"replicas a word", []string{"string:collector.replicas=two"}, "at '/collector/replicas': got string, want integer"},
		{"a boolean as a string", []string{"string:exporter.enabled=yes"}, "at '/exporter/enabled': got string, want boolean"},
		{"monitoring neither auto nor a boolean", []string{"serviceMonitor.enabled=sometimes"}, "/serviceMonitor/enabled"},
		{"interval not a duration", []string{"exporter.interval=fast"}, "/exporter/interval"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := slices.Clone(required)
			for _, s := range tc.set {
				if v, ok := strings.CutPrefix(s, "string:"); ok {
					args = append(args, "--set-string", v)
					continue
				}
				args = append(args, "--set", s)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			_, err := Template(ctx, helm, root, args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("helm template --set %v: %v, want an error with %q", tc.set, err, tc.want)
			}
		})
	}
}

// TestDefaultTier: exporter.kubernetes.defaultTier reaches the exporter when it is a tier of
// the chart's price book, and unchecked where the price book is an existing ConfigMap.
func TestDefaultTier(t *testing.T) {
	helm := helmBinary(t)
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte("pricebook:\n  content: |\n    version: 1\n    currency: EUR\n    prices: {H100-SXM5-80GB: 2.0}\n    tiers: {pro: 1.0, budget: 0.7}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"the default values", nil, "--kubernetes.default-tier=default"},
		{"a tier of the price book", []string{"-f", values, "--set", "exporter.kubernetes.defaultTier=budget"}, "--kubernetes.default-tier=budget"},
		{"an existing ConfigMap", []string{"--set", "pricebook.existingConfigMap=prices", "--set", "exporter.kubernetes.defaultTier=gold"}, "--kubernetes.default-tier=gold"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ds := find(parse(t, template(t, helm, tc.args...)), "DaemonSet", "slicemeter-exporter")
			if ds == nil {
				t.Fatal("no exporter DaemonSet")
			}
			args := toStrings(at(ds.raw, "spec", "template", "spec", "containers", 0, "args"))
			if !slices.Contains(args, tc.want) {
				t.Errorf("the exporter's args %q lack %q", args, tc.want)
			}
		})
	}
}

// TestExporterImage: the DaemonSet runs the exporter-only image, with the main image's tag by
// default; exporter.image.repository "" falls back to the main image, which the collector and
// the attribution service always run.
func TestExporterImage(t *testing.T) {
	helm := helmBinary(t)
	for _, tc := range []struct {
		name           string
		args           []string
		exporter, main string
	}{
		{"the default values", nil, "ghcr.io/slicemeter/slicemeter-exporter:0.1.0", "ghcr.io/slicemeter/slicemeter:0.1.0"},
		{"the main image's tag", []string{"--set", "image.tag=1.2.3"}, "ghcr.io/slicemeter/slicemeter-exporter:1.2.3", "ghcr.io/slicemeter/slicemeter:1.2.3"},
		{"a tag of its own", []string{"--set", "image.tag=1.2.3", "--set-string", "exporter.image.tag=1.2.4"}, "ghcr.io/slicemeter/slicemeter-exporter:1.2.4", "ghcr.io/slicemeter/slicemeter:1.2.3"},
		{"no repository: the main image", []string{"--set", "image.tag=1.2.3", "--set", "exporter.image.repository="}, "ghcr.io/slicemeter/slicemeter:1.2.3", "ghcr.io/slicemeter/slicemeter:1.2.3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := parse(t, template(t, helm, tc.args...))
			image := func(kind, name string) any {
				o := find(objs, kind, name)
				if o == nil {
					t.Fatalf("no %s %s", kind, name)
				}
				return at(o.raw, "spec", "template", "spec", "containers", 0, "image")
			}
			if got := image("DaemonSet", "slicemeter-exporter"); got != tc.exporter {
				t.Errorf("the exporter runs %v, want %s", got, tc.exporter)
			}
			for _, name := range []string{"slicemeter-collector", "slicemeter-attribution"} {
				if got := image("Deployment", name); got != tc.main {
					t.Errorf("%s runs %v, want %s", name, got, tc.main)
				}
			}
		})
	}
}

// object is the part of a rendered object the tests read.
type object struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Spec map[string]any    `yaml:"spec"`
	Data map[string]string `yaml:"data"`
	// Rules of a ClusterRole.
	Rules []struct {
		APIGroups []string `yaml:"apiGroups"`
		Resources []string `yaml:"resources"`
		Verbs     []string `yaml:"verbs"`
	} `yaml:"rules"`
	raw map[string]any
}

func parse(t *testing.T, manifests []byte) []object {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(manifests))
	var objs []object
	for {
		var node yaml.Node
		err := dec.Decode(&node)
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("parsing the rendered manifests: %v", err)
		}
		var o object
		if err := node.Decode(&o); err != nil {
			t.Fatal(err)
		}
		if o.Kind == "" {
			continue // a document of comments only
		}
		if err := node.Decode(&o.raw); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, o)
	}
}

// at walks a decoded object along keys (a string for a map, an int for a list).
func at(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func find(objs []object, kind, name string) *object {
	for i := range objs {
		if objs[i].Kind == kind && objs[i].Metadata.Name == name {
			return &objs[i]
		}
	}
	return nil
}

// TestChartObjects reads the rendered objects for what deploy/helm/README.md promises.
func TestChartObjects(t *testing.T) {
	helm := helmBinary(t)
	// As helm install renders it on a cluster with prometheus-operator's CRDs.
	objs := parse(t, template(t, helm, "--api-versions", "monitoring.coreos.com/v1/ServiceMonitor", "--api-versions", "monitoring.coreos.com/v1/PrometheusRule"))
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.Kind+"/"+o.Metadata.Name)
	}
	sort.Strings(kinds)
	t.Logf("rendered: %s", strings.Join(kinds, " "))

	role := find(objs, "ClusterRole", "slicemeter-exporter")
	if role == nil {
		t.Fatal("no ClusterRole slicemeter-exporter")
	}
	if len(role.Rules) != 1 || !reflect.DeepEqual(role.Rules[0].APIGroups, []string{""}) ||
		!reflect.DeepEqual(role.Rules[0].Resources, []string{"pods"}) ||
		!reflect.DeepEqual(role.Rules[0].Verbs, []string{"get", "list", "watch"}) {
		t.Errorf("the exporter's ClusterRole grants %+v, want get, list, watch on pods only", role.Rules)
	}
	for _, o := range objs {
		if (o.Kind == "Role" || o.Kind == "ClusterRole") && o.Metadata.Name != "slicemeter-exporter" {
			t.Errorf("%s %s: the chart grants only the exporter's pod reads", o.Kind, o.Metadata.Name)
		}
	}

	ds := find(objs, "DaemonSet", "slicemeter-exporter")
	if ds == nil {
		t.Fatal("no exporter DaemonSet")
	}
	pod := at(ds.raw, "spec", "template", "spec")
	if at(pod, "hostPID") != true {
		t.Error("the exporter DaemonSet lacks hostPID")
	}
	if at(pod, "nodeSelector", "nvidia.com/gpu.present") != "true" {
		t.Errorf("the exporter's nodeSelector is %v, want GPU nodes", at(pod, "nodeSelector"))
	}
	if at(pod, "tolerations", 0, "key") != "nvidia.com/gpu" {
		t.Errorf("the exporter's tolerations are %v, want nvidia.com/gpu's", at(pod, "tolerations"))
	}
	var mounted bool
	for _, m := range at(pod, "containers", 0, "volumeMounts").([]any) {
		if at(m, "mountPath") == "/var/lib/kubelet/pod-resources" {
			mounted = at(m, "readOnly") == true
		}
	}
	if !mounted {
		t.Error("the pod-resources directory is not mounted read-only into the exporter")
	}
	args := strings.Join(toStrings(at(pod, "containers", 0, "args")), " ")
	for _, want := range []string{"exporter", "--source=nvml", "--kubernetes", "--kubernetes.pod-resources-socket=/var/lib/kubelet/pod-resources/kubelet.sock", "--kafka.brokers=kafka:9092"} {
		if !strings.Contains(args, want) {
			t.Errorf("the exporter's args %q lack %q", args, want)
		}
	}
	if at(pod, "containers", 0, "resources", "requests", "memory") != "96Mi" {
		t.Errorf("the exporter requests %v", at(pod, "containers", 0, "resources", "requests"))
	}

	for _, c := range []string{"collector", "attribution"} {
		d := find(objs, "Deployment", "slicemeter-"+c)
		if d == nil {
			t.Errorf("no %s Deployment", c)
			continue
		}
		ctr := at(d.raw, "spec", "template", "spec", "containers", 0)
		if at(ctr, "livenessProbe", "httpGet", "path") != "/healthz" || at(ctr, "readinessProbe", "httpGet", "path") != "/readyz" {
			t.Errorf("%s's probes: %v, %v", c, at(ctr, "livenessProbe"), at(ctr, "readinessProbe"))
		}
		if at(ctr, "securityContext", "runAsNonRoot") != true {
			t.Errorf("%s does not run as non-root", c)
		}
		if find(objs, "PodDisruptionBudget", "slicemeter-"+c) == nil {
			t.Errorf("no PodDisruptionBudget for %s", c)
		}
	}
	for _, c := range []string{"exporter", "collector", "attribution"} {
		sm, svc := find(objs, "ServiceMonitor", "slicemeter-"+c), find(objs, "Service", "slicemeter-"+c)
		if sm == nil || svc == nil {
			t.Errorf("no Service and ServiceMonitor for %s", c)
			continue
		}
		// The job the alerts select (up{job=~"slicemeter-exporter.*"}) must not depend on the
		// release's name: the ServiceMonitor takes it from a label of the Service.
		jobLabel, _ := sm.Spec["jobLabel"].(string)
		if job := svc.Metadata.Labels[jobLabel]; jobLabel == "" || job != "slicemeter-"+c {
			t.Errorf("%s's scrape job is %q (jobLabel %q), want slicemeter-%s", c, job, jobLabel, c)
		}
	}

	rule := find(objs, "PrometheusRule", "slicemeter")
	if rule == nil {
		t.Fatal("no PrometheusRule")
	}
	b, err := os.ReadFile(filepath.Join(root, "alerts", "slicemeter.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules map[string]any
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rule.raw["spec"], rules) {
		t.Error("the PrometheusRule's spec is not alerts/slicemeter.rules.yml")
	}
	if find(objs, "PrometheusRule", "slicemeter-dcgm-compat") != nil {
		t.Error("the dcgm-compat rules are rendered by default; they are optional")
	}

	dashboards, err := filepath.Glob(filepath.Join(root, "dashboards", "json", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dashboards {
		name := strings.TrimSuffix(filepath.Base(d), ".json")
		cm := find(objs, "ConfigMap", "slicemeter-dashboard-"+name)
		if cm == nil {
			t.Errorf("no ConfigMap for dashboards/json/%s.json", name)
			continue
		}
		want, err := os.ReadFile(d)
		if err != nil {
			t.Fatal(err)
		}
		if cm.Metadata.Labels["grafana_dashboard"] != "1" {
			t.Errorf("%s lacks the sidecar label", cm.Metadata.Name)
		}
		if got := cm.Data["slicemeter-"+name+".json"]; strings.TrimSpace(got) != strings.TrimSpace(string(want)) {
			t.Errorf("%s does not hold dashboards/json/%s.json", cm.Metadata.Name, name)
		}
	}
}

// TestChartAllValues: with every option on, the Kafka security flags, the Secret mounts and
// the optional objects are there.
func TestChartAllValues(t *testing.T) {
	helm := helmBinary(t)
	objs := parse(t, template(t, helm, "-f", "testdata/all.values.yaml"))
	ds := find(objs, "DaemonSet", "slicemeter-exporter")
	if ds == nil {
		t.Fatal("no exporter DaemonSet")
	}
	pod := at(ds.raw, "spec", "template", "spec")
	if at(pod, "runtimeClassName") != "nvidia" {
		t.Errorf("runtimeClassName = %v, want nvidia", at(pod, "runtimeClassName"))
	}
	args := strings.Join(toStrings(at(pod, "containers", 0, "args")), " ")
	for _, want := range []string{
		"--kafka.tls.enable", "--kafka.tls.ca-file=/etc/slicemeter/kafka-ca/ca.crt",
		"--kafka.tls.cert-file=/etc/slicemeter/kafka-client/tls.crt", "--kafka.tls.server-name=kafka.example.com",
		"--kafka.sasl.mechanism=scram-sha-512", "--kafka.sasl.username=slicemeter",
		"--kafka.sasl.password-file=/etc/slicemeter/kafka-sasl/password",
		"--kubernetes.tenant-label=example.com/tenant", "--kubernetes.tier-label=example.com/tier",
	} {
		if !strings.Contains(args, want) {
			t.Errorf("the exporter's args %q lack %q", args, want)
		}
	}
	col := find(objs, "Deployment", "slicemeter-collector")
	if col == nil {
		t.Fatal("no collector")
	}
	ctr := at(col.raw, "spec", "template", "spec", "containers", 0)
	cargs := strings.Join(toStrings(at(ctr, "args")), " ")
	if !strings.Contains(cargs, "--clickhouse.cluster=metering") || strings.Contains(cargs, "--clickhouse.dsn") {
		t.Errorf("the collector's args %q: want the cluster and no DSN flag (it comes from the Secret)", cargs)
	}
	if at(ctr, "env", 0, "name") != "SLICEMETER_CLICKHOUSE_DSN" || at(ctr, "env", 0, "valueFrom", "secretKeyRef", "name") != "clickhouse-dsn" {
		t.Errorf("the collector's env %v lacks the DSN from its Secret", at(ctr, "env"))
	}
	// Two attribution replicas share the nodes through the shard group, over Kafka's TLS/SASL.
	attr := find(objs, "Deployment", "slicemeter-attribution")
	if attr == nil {
		t.Fatal("no attribution")
	}
	aspec := at(attr.raw, "spec", "template", "spec")
	aargs := strings.Join(toStrings(at(aspec, "containers", 0, "args")), " ")
	for _, want := range []string{"--attribution.shard.brokers=", "--kafka.sasl.password-file=/etc/slicemeter/kafka-sasl/password", "--kafka.tls.ca-file="} {
		if !strings.Contains(aargs, want) {
			t.Errorf("the attribution's args %q lack %q", aargs, want)
		}
	}
	if strings.Contains(aargs, "--kafka.brokers") {
		t.Errorf("the attribution's args %q: the brokers are the shard group's, not --kafka.brokers", aargs)
	}
	if !strings.Contains(fmt.Sprint(at(aspec, "volumes")), "kafka-sasl") {
		t.Errorf("the attribution's volumes %v lack the SASL password's Secret", at(aspec, "volumes"))
	}
	if find(objs, "Secret", "slicemeter-api-auth") == nil {
		t.Error("no Secret for the auth file given in values")
	}
	if find(objs, "PrometheusRule", "slicemeter-dcgm-compat") == nil {
		t.Error("no dcgm-compat PrometheusRule")
	}
}

func toStrings(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

func filter(objs []object, kinds ...string) []object {
	var out []object
	for _, o := range objs {
		for _, k := range kinds {
			if o.Kind == k {
				out = append(out, o)
			}
		}
	}
	return out
}

// TestChartAcceptedByAPIServer: a real kube-apiserver, with prometheus-operator's CRDs applied,
// accepts every object of the rendered manifests and of the chart with every option on
// (kubectl apply --dry-run=server: admission and validation run, nothing is stored).
func TestChartAcceptedByAPIServer(t *testing.T) {
	helm := helmBinary(t)
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed")
	}
	k := localtest.NewKubeAPIServer(t)
	kc, err := k.WriteKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run := func(stdin []byte, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", kc}, args...)...)
		cmd.Stdin = bytes.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	manifests, err := os.ReadFile(filepath.Join(root, ManifestsFile))
	if err != nil {
		t.Fatal(err)
	}
	monitoring, err := os.ReadFile(filepath.Join(root, MonitoringFile))
	if err != nil {
		t.Fatal(err)
	}
	run(nil, "create", "namespace", Namespace)
	// Before prometheus-operator's CRDs: the plain manifests (and helm's render, which holds the
	// same objects) apply to a cluster without them.
	t.Run("without prometheus-operator", func(t *testing.T) {
		out := run(manifests, "apply", "--dry-run=server", "-f", "-")
		if n, want := strings.Count(out, "(server dry run)"), len(parse(t, manifests)); n != want {
			t.Errorf("the API server accepted %d of %d objects:\n%s", n, want, out)
		}
	})
	crds, err := local.PrometheusOperatorCRDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range crds {
		run(nil, "apply", "--server-side", "-f", crd)
	}
	run(nil, "wait", "--for=condition=Established", "--timeout=120s", "crd/servicemonitors.monitoring.coreos.com", "crd/prometheusrules.monitoring.coreos.com")

	// The check can fail: the server refuses a field that is not in a schema, built-in or CRD.
	for _, bad := range []string{
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bad, namespace: " + Namespace + "}\nspec: {}\n",
		"apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata: {name: bad, namespace: " + Namespace + "}\nspec: {endpoints: [{port: http, interval: soon}], selector: {}}\n",
	} {
		cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig", kc, "apply", "--dry-run=server", "-f", "-")
		cmd.Stdin = strings.NewReader(bad)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Errorf("the API server accepted an invalid object:\n%s\n%s", bad, out)
		}
		t.Logf("refused as it should be: %s", strings.TrimSpace(string(out)))
	}

	for _, tc := range []struct {
		name      string
		manifests []byte
	}{
		{ManifestsFile + " and " + MonitoringFile, append(append(slices.Clone(manifests), '\n'), monitoring...)},
		{"testdata/all.values.yaml", template(t, helm, "-f", "testdata/all.values.yaml")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := parse(t, tc.manifests)
			out := run(tc.manifests, "apply", "--dry-run=server", "-f", "-")
			var accepted int
			for _, line := range strings.Split(out, "\n") {
				if strings.HasSuffix(strings.TrimSpace(line), "(server dry run)") {
					accepted++
				}
			}
			if accepted != len(objs) {
				t.Errorf("the API server accepted %d of %d objects:\n%s", accepted, len(objs), out)
			}
			for _, kind := range []string{"DaemonSet", "Deployment", "PodDisruptionBudget", "ServiceMonitor", "PrometheusRule", "ClusterRole", "ClusterRoleBinding", "ConfigMap"} {
				if len(filter(objs, kind)) == 0 {
					t.Errorf("no %s among the objects", kind)
				}
			}
		})
	}
}

// TestKubeVersion: helm renders for the version of the API server that checks the objects.
func TestKubeVersion(t *testing.T) {
	if KubeVersion != "v"+local.KubeAPIServerVersion {
		t.Errorf("KubeVersion %s, the harness's kube-apiserver v%s", KubeVersion, local.KubeAPIServerVersion)
	}
}

// TestChartArgsParse: the binary accepts the flags every container is given (kingpin refuses
// an unknown flag with exit 2 before --help answers), with the default values and with every
// option on.
func TestChartArgsParse(t *testing.T) {
	helm := helmBinary(t)
	bin := apptest.Binary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// The check can fail: an unknown flag before --help is exit 2.
	if err := exec.CommandContext(ctx, bin, "collector", "--kafka.brokers=k:9092", "--no-such-flag", "--help").Run(); err == nil {
		t.Fatal("slicemeter collector --no-such-flag --help succeeded; the check below would prove nothing")
	}
	help, _ := exec.CommandContext(ctx, bin, "exporter", "--help").CombinedOutput()
	// The exporter's --kubernetes flags come with issue 14's discovery; until this binary has
	// them, the rest of its flags are still checked.
	hasKubernetes := bytes.Contains(help, []byte("--kubernetes"))
	for _, values := range []string{"", "testdata/all.values.yaml"} {
		var args []string
		if values != "" {
			args = []string{"-f", values}
		}
		for _, o := range parse(t, template(t, helm, args...)) {
			if o.Kind != "DaemonSet" && o.Kind != "Deployment" {
				continue
			}
			for i := range at(o.raw, "spec", "template", "spec", "containers").([]any) {
				argv := toStrings(at(o.raw, "spec", "template", "spec", "containers", i, "args"))
				var checked []string
				for _, a := range argv {
					if !hasKubernetes && strings.HasPrefix(a, "--kubernetes") {
						t.Logf("%s %s: %s not checked: this binary has no --kubernetes yet", values, o.Metadata.Name, a)
						continue
					}
					checked = append(checked, a)
				}
				cmd := exec.CommandContext(ctx, bin, append(checked, "--help")...)
				cmd.Env = []string{"PATH=" + os.Getenv("PATH")} // no SLICEMETER_* of the caller's
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("%s %s: slicemeter %s: %v\n%s", values, o.Metadata.Name, strings.Join(checked, " "), err, lastLine(out))
				}
			}
		}
	}
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}
