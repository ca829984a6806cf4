package local

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// PrometheusOptions configures StartPrometheus.
type PrometheusOptions struct {
	// Targets maps a job name to the host:port addresses it scrapes (/metrics, plain HTTP).
	Targets map[string][]string
	// ScrapeInterval defaults to 1 s: tests want series quickly.
	ScrapeInterval time.Duration
	// RuleFiles are loaded as alerting and recording rules.
	RuleFiles []string
	TempDir   string
}

// Prometheus is a Prometheus server (Debian package prometheus) started by StartPrometheus.
type Prometheus struct {
	dir  string
	port int
	proc *process
}

// StartPrometheus starts a Prometheus server that scrapes the given targets and returns once its
// HTTP API answers ready.
func StartPrometheus(ctx context.Context, opts PrometheusOptions) (*Prometheus, error) {
	bin, ok := lookFor([]string{"prometheus"}, []string{"/usr/bin/prometheus"})
	if !ok {
		return nil, fmt.Errorf("no prometheus binary found: "+installHint, "prometheus")
	}
	if opts.ScrapeInterval <= 0 {
		opts.ScrapeInterval = time.Second
	}
	dir, err := os.MkdirTemp(opts.TempDir, "slicemeter-prometheus-")
	if err != nil {
		return nil, fmt.Errorf("creating Prometheus's directory: %w", err)
	}
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "global:\n  scrape_interval: %s\n  evaluation_interval: %s\n", opts.ScrapeInterval, opts.ScrapeInterval)
	if len(opts.RuleFiles) > 0 {
		cfg.WriteString("rule_files:\n")
		for _, f := range opts.RuleFiles {
			abs, err := filepath.Abs(f)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(&cfg, "  - %q\n", abs)
		}
	}
	cfg.WriteString("scrape_configs:\n")
	for job, targets := range opts.Targets {
		fmt.Fprintf(&cfg, "  - job_name: %q\n    static_configs:\n      - targets: [", job)
		for i, t := range targets {
			if i > 0 {
				cfg.WriteString(", ")
			}
			fmt.Fprintf(&cfg, "%q", t)
		}
		cfg.WriteString("]\n")
	}
	config := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(config, []byte(cfg.String()), 0o644); err != nil {
		return nil, fmt.Errorf("writing Prometheus's config: %w", err)
	}
	p := &Prometheus{dir: dir}
	logFile := filepath.Join(dir, "prometheus.log")
	for attempt := 1; ; attempt++ {
		if p.port, err = FreePort(); err != nil {
			return nil, err
		}
		p.proc, err = startProcess("prometheus", dir, logFile, bin,
			"--config.file="+config, "--storage.tsdb.path="+filepath.Join(dir, "data"),
			"--web.listen-address=127.0.0.1:"+strconv.Itoa(p.port), "--web.enable-lifecycle")
		if err == nil {
			err = p.proc.waitReady(ctx, 100*time.Millisecond, []string{logFile}, p.ready)
		}
		if err == nil || attempt == 3 || !portInUse([]string{logFile}) {
			break
		}
	}
	if err != nil {
		if p.proc != nil {
			_ = p.proc.terminate(orDefault(nil), stopGrace)
		}
		return nil, fmt.Errorf("starting Prometheus (directory %s): %w", dir, err)
	}
	return p, nil
}

func (p *Prometheus) ready(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL()+"/-/ready", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("prometheus /-/ready: %s", resp.Status)
	}
	return nil
}

// URL is the server's base URL, e.g. http://127.0.0.1:PORT.
func (p *Prometheus) URL() string { return "http://127.0.0.1:" + strconv.Itoa(p.port) }

// Close stops the server and removes its directory.
func (p *Prometheus) Close() error {
	err := p.proc.terminate(orDefault(nil), stopGrace)
	if rmErr := os.RemoveAll(p.dir); err == nil {
		err = rmErr
	}
	return err
}
