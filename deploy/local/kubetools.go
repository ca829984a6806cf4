package local

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// HelmVersion is the Helm release the chart is linted and rendered with.
const HelmVersion = "3.22.0"

// PrometheusOperatorVersion is the prometheus-operator release whose CRDs (ServiceMonitor,
// PrometheusRule) the chart's objects are checked against.
const PrometheusOperatorVersion = "0.85.0"

// HelmBinary returns the path of helm built from helm.sh/helm/v3 at HelmVersion, building it
// the first time into CacheDir()/helm-VERSION/bin (`go install`, a minute or two). Concurrent
// callers wait for one build.
func HelmBinary(ctx context.Context, log *slog.Logger) (string, error) {
	log = orDefault(log)
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	home := filepath.Join(cache, "helm-"+HelmVersion)
	bin := filepath.Join(home, "bin", "helm")
	marker := filepath.Join(home, "bin.complete")
	want := "v" + HelmVersion
	done := func() bool {
		b, err := os.ReadFile(marker)
		return err == nil && strings.TrimSpace(string(b)) == want
	}
	if done() {
		return bin, nil
	}
	if err := os.MkdirAll(home, 0o755); err != nil {
		return "", fmt.Errorf("creating helm's cache directory: %w", err)
	}
	unlock, err := lockFile(ctx, filepath.Join(home, ".lock"))
	if err != nil {
		return "", fmt.Errorf("locking helm's cache directory %s: %w", home, err)
	}
	defer unlock()
	if done() {
		return bin, nil
	}
	// Install into a fresh directory and rename: an interrupted build never looks complete.
	tmp := filepath.Join(home, "bin.tmp")
	if err := os.RemoveAll(tmp); err != nil {
		return "", fmt.Errorf("removing a partial helm build: %w", err)
	}
	log.Info("building helm (once)", "version", HelmVersion, "into", bin)
	began := time.Now()
	cmd := exec.CommandContext(ctx, "go", "install", "helm.sh/helm/v3/cmd/helm@v"+HelmVersion)
	cmd.Dir = home
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOWORK=off", "GOFLAGS=", "CGO_ENABLED=0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building helm with %s: %w\n%s", strings.Join(cmd.Args, " "), err, lastLines(out.String(), 40))
	}
	if err := os.RemoveAll(filepath.Join(home, "bin")); err != nil {
		return "", fmt.Errorf("removing an old helm build: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(home, "bin")); err != nil {
		return "", fmt.Errorf("moving helm into place: %w", err)
	}
	if err := os.WriteFile(marker, []byte(want+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("marking helm built: %w", err)
	}
	log.Info("helm built", "took", time.Since(began).Round(time.Second))
	return bin, nil
}

// PrometheusOperatorCRDs returns the files of the ServiceMonitor and PrometheusRule CRDs from
// the Go module github.com/prometheus-operator/prometheus-operator at PrometheusOperatorVersion
// (its example/prometheus-operator-crd directory), downloading the module into the module
// cache the first time.
func PrometheusOperatorCRDs(ctx context.Context) ([]string, error) {
	mod := "github.com/prometheus-operator/prometheus-operator@v" + PrometheusOperatorVersion
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", mod)
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	cmd.Dir = os.TempDir() // outside any module: the download must not touch a go.mod
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("downloading %s: %w\n%s", mod, err, lastLines(stderr.String(), 20))
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil {
		return nil, fmt.Errorf("reading go mod download's answer for %s: %w", mod, err)
	}
	if m.Error != "" || m.Dir == "" {
		return nil, fmt.Errorf("downloading %s: %s", mod, m.Error)
	}
	var files []string
	for _, kind := range []string{"servicemonitors", "prometheusrules"} {
		f := filepath.Join(m.Dir, "example", "prometheus-operator-crd", "monitoring.coreos.com_"+kind+".yaml")
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("the %s CRD is not where %s keeps it: %w", kind, mod, err)
		}
		files = append(files, f)
	}
	return files, nil
}
