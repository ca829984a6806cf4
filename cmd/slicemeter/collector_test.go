//go:build !exporter_only

package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"go.yaml.in/yaml/v3"
)

// The collector's retention defaults are the Helm chart's: a collector run by hand keeps raw
// samples 14 days, as one the chart runs does.
func TestCollectorRetentionDefaultsAreTheChart(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "helm", "slicemeter", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		Collector struct {
			Retention struct{ Raw, Rollup1s, Rollup1m string }
		}
	}
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatalf("values.yaml: %v", err)
	}
	app := kingpin.New("slicemeter", "")
	cmd := newCollectorCmd(app)
	if _, err := app.Parse([]string{"collector", "--kafka.brokers", "k:9092"}); err != nil {
		t.Fatal(err)
	}
	got := cmd.cfg.Collector.Retention
	for _, c := range []struct {
		flag, chart string
		binary      time.Duration
	}{
		{"--retention.raw", values.Collector.Retention.Raw, got.Raw},
		{"--retention.rollup-1s", values.Collector.Retention.Rollup1s, got.Rollup1s},
		{"--retention.rollup-1m", values.Collector.Retention.Rollup1m, got.Rollup1m},
	} {
		chart, err := time.ParseDuration(c.chart)
		if err != nil {
			t.Errorf("values.yaml collector.retention for %s: %q: %v", c.flag, c.chart, err)
			continue
		}
		if c.binary != chart {
			t.Errorf("%s: the binary's default is %s, the chart's %s", c.flag, c.binary, chart)
		}
	}
	if got.Raw != 14*24*time.Hour {
		t.Errorf("--retention.raw default %s, want 336h (14 days)", got.Raw)
	}
}
