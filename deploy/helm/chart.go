// Package helm keeps the Helm chart in deploy/helm/slicemeter and the plain manifests rendered
// from it (deploy/kubernetes) in step with their sources: the alerting rules of alerts/ and the
// dashboards of dashboards/json are copied into the chart's files/, never edited there, and
// `go generate ./deploy/helm` copies them again and renders the manifests. The tests fail when
// either is stale, lint the chart and have a real kube-apiserver accept every object.
package helm

//go:generate go run ./gen

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// ChartDir is the chart, relative to the repository root.
const ChartDir = "deploy/helm/slicemeter"

// ManifestsFile holds the chart rendered with ManifestsValues, relative to the root; without
// the prometheus-operator objects, so that it applies to any cluster.
const ManifestsFile = "deploy/kubernetes/slicemeter.yaml"

// MonitoringFile holds the chart's ServiceMonitors and PrometheusRule, rendered with the same
// values, for a cluster with prometheus-operator's CRDs.
const MonitoringFile = "deploy/kubernetes/slicemeter-monitoring.yaml"

// ManifestsValues is the values file the plain manifests are rendered with (relative to the
// root): the required values the chart has no default for (kafka.brokers, clickhouse.dsn,
// attribution.auth.existingSecret), given example values.
const ManifestsValues = "deploy/helm/manifests.values.yaml"

// monitoringTemplates are the chart's prometheus-operator objects.
var monitoringTemplates = []string{"templates/servicemonitors.yaml", "templates/prometheusrule.yaml"}

// Release and Namespace are those of the rendered manifests.
const (
	Release   = "slicemeter"
	Namespace = "slicemeter"
)

// KubeVersion is the Kubernetes version helm renders and lints for: the harness's API server's.
// A helm built with go install would otherwise assume its compiled-in default (v1.20).
const KubeVersion = "v1.31.4"

// Copy is one file of the chart's files/ and the file of the repository it comes from.
type Copy struct{ From, To string }

// Copies lists what the chart carries from elsewhere in the repository (paths relative to the
// root): both rules files of alerts/ and every dashboard of dashboards/json.
func Copies(root string) ([]Copy, error) {
	copies := []Copy{
		{"alerts/slicemeter.rules.yml", ChartDir + "/files/alerts/slicemeter.rules.yml"},
		{"alerts/dcgm-compat.rules.yml", ChartDir + "/files/alerts/dcgm-compat.rules.yml"},
	}
	dashboards, err := filepath.Glob(filepath.Join(root, "dashboards", "json", "*.json"))
	if err != nil {
		return nil, err
	}
	if len(dashboards) == 0 {
		return nil, fmt.Errorf("no dashboards in %s", filepath.Join(root, "dashboards", "json"))
	}
	sort.Strings(dashboards)
	for _, d := range dashboards {
		name := filepath.Base(d)
		copies = append(copies, Copy{"dashboards/json/" + name, ChartDir + "/files/dashboards/" + name})
	}
	return copies, nil
}

// Stale returns, for each copy whose bytes differ from its source or that is missing, and for
// each file of files/ that no source backs, a line saying so; none means the chart is fresh.
func Stale(root string) ([]string, error) {
	copies, err := Copies(root)
	if err != nil {
		return nil, err
	}
	var stale []string
	want := map[string]bool{}
	for _, c := range copies {
		want[c.To] = true
		src, err := os.ReadFile(filepath.Join(root, c.From))
		if err != nil {
			return nil, fmt.Errorf("reading the chart's source %s: %w", c.From, err)
		}
		dst, err := os.ReadFile(filepath.Join(root, c.To))
		if err != nil || !bytes.Equal(src, dst) {
			stale = append(stale, fmt.Sprintf("%s differs from %s", c.To, c.From))
		}
	}
	err = filepath.WalkDir(filepath.Join(root, ChartDir, "files"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		if !want[filepath.ToSlash(rel)] {
			stale = append(stale, fmt.Sprintf("%s has no source any more", rel))
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("listing the chart's files: %w", err)
	}
	return stale, nil
}

// Sync copies every source into the chart and removes the files no source backs.
func Sync(root string) error {
	copies, err := Copies(root)
	if err != nil {
		return err
	}
	files := filepath.Join(root, ChartDir, "files")
	if err := os.RemoveAll(files); err != nil {
		return fmt.Errorf("clearing the chart's files: %w", err)
	}
	for _, c := range copies {
		b, err := os.ReadFile(filepath.Join(root, c.From))
		if err != nil {
			return fmt.Errorf("reading the chart's source %s: %w", c.From, err)
		}
		to := filepath.Join(root, c.To)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", filepath.Dir(to), err)
		}
		if err := os.WriteFile(to, b, 0o644); err != nil {
			return fmt.Errorf("copying %s into the chart: %w", c.From, err)
		}
	}
	return nil
}

// manifestsHeader opens ManifestsFile.
const manifestsHeader = `# slicemeter on Kubernetes without Helm: deploy/helm/slicemeter rendered with ` + ManifestsValues + `
# (Kafka kafka:9092, ClickHouse clickhouse://clickhouse:9000/slicemeter, the API auth file in the Secret
# slicemeter-api-auth: edit them for your cluster) into the namespace ` + Namespace + ` (deploy/helm/README.md).
# The ServiceMonitors and PrometheusRule are in ` + MonitoringFile + `. Generated by ` + "`go generate ./deploy/helm`" + `
# (helm template ` + Release + ` ` + ChartDir + ` --namespace ` + Namespace + ` --kube-version ` + KubeVersion + ` -f ` + ManifestsValues + `); do not edit.
`

// monitoringHeader opens MonitoringFile.
const monitoringHeader = `# slicemeter's prometheus-operator objects (ServiceMonitors, PrometheusRule) for the manifests of
# ` + ManifestsFile + `: apply them where prometheus-operator's CRDs are installed. Generated by
# ` + "`go generate ./deploy/helm`" + ` (helm template … --set serviceMonitor.enabled=true --set prometheusRule.enabled=true
# --show-only …); do not edit.
`

// Template runs helm template on the chart in root with the release and namespace of the
// manifests and the given extra arguments (--set, -f), and returns what it prints.
func Template(ctx context.Context, helm, root string, args ...string) ([]byte, error) {
	argv := append([]string{"template", Release, filepath.Join(root, ChartDir), "--namespace", Namespace, "--kube-version", KubeVersion}, args...)
	cmd := exec.CommandContext(ctx, helm, argv...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("helm %s: %w\n%s", strings.Join(argv, " "), err, stderr.String())
	}
	return out, nil
}

// Manifests is what ManifestsFile must hold: the header, then the chart rendered with
// ManifestsValues (helm template knows no prometheus-operator CRDs: none of its objects).
func Manifests(ctx context.Context, helm, root string) ([]byte, error) {
	out, err := Template(ctx, helm, root, "-f", filepath.Join(root, ManifestsValues))
	if err != nil {
		return nil, err
	}
	return append([]byte(manifestsHeader), out...), nil
}

// Monitoring is what MonitoringFile must hold: the header, then the chart's prometheus-operator
// objects rendered with ManifestsValues.
func Monitoring(ctx context.Context, helm, root string) ([]byte, error) {
	args := []string{"-f", filepath.Join(root, ManifestsValues), "--set", "serviceMonitor.enabled=true", "--set", "prometheusRule.enabled=true"}
	for _, t := range monitoringTemplates {
		args = append(args, "--show-only", t)
	}
	out, err := Template(ctx, helm, root, args...)
	if err != nil {
		return nil, err
	}
	return append([]byte(monitoringHeader), out...), nil
}
