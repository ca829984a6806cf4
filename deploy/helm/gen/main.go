// Command gen copies the chart's files from alerts/ and dashboards/json and renders the plain
// manifests (deploy/kubernetes) with helm; `go generate ./deploy/helm` runs it from deploy/helm.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/slicemeter/slicemeter/deploy/helm"
	"github.com/slicemeter/slicemeter/deploy/local"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "deploy/helm/gen:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(root, helm.ChartDir, "Chart.yaml")); err != nil {
		return fmt.Errorf("run from deploy/helm (go generate ./deploy/helm): %w", err)
	}
	if err := helm.Sync(root); err != nil {
		return err
	}
	bin, err := local.HelmBinary(ctx, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if err != nil {
		return err
	}
	for _, f := range []struct {
		file   string
		render func(context.Context, string, string) ([]byte, error)
	}{{helm.ManifestsFile, helm.Manifests}, {helm.MonitoringFile, helm.Monitoring}} {
		out, err := f.render(ctx, bin, root)
		if err != nil {
			return err
		}
		path := filepath.Join(root, f.file)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, out, 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", f.file, err)
		}
	}
	return nil
}
