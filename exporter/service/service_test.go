package service

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slicemeter/slicemeter/exporter/kubernetes"
	"github.com/slicemeter/slicemeter/internal/usage"
)

const (
	nodeScenario = "../capture/testdata/node.yaml" // one node, 6 instances, 30 ticks
	nodeCapture  = "../capture/testdata/node.capture"
)

// Config problems are usage errors whose messages name the flag.
func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		cfg  Config
		want []string
	}{
		{"unknown source", Config{Source: "dcgm"}, []string{`--source "dcgm"`, "nvml, sim or replay"}},
		{"sim without a scenario", Config{Source: "sim"}, []string{"--scenario is required"}},
		{"replay without a file", Config{Source: "replay"}, []string{"--replay FILE is required"}},
		{"replay of a missing file", Config{Source: "replay", Replay: filepath.Join(dir, "none")}, []string{"none"}},
		{"recording a replay", Config{Source: "replay", Replay: nodeCapture, Record: filepath.Join(dir, "x")}, []string{"--record"}},
		{"recording an outage scenario", Config{Source: "sim", ScenarioPath: "../../schemas/scenario/testdata/outage-coldstart.yaml", Record: filepath.Join(dir, "y")}, []string{"one node without outages"}},
		{"recording into no directory", Config{Source: "sim", ScenarioPath: nodeScenario, Record: filepath.Join(dir, "none", "z")}, []string{"--record"}},
		{"nvml with a zero interval", Config{Source: "nvml"}, []string{"--interval"}},
		{"kubernetes without a node name", Config{Source: "sim", ScenarioPath: nodeScenario,
			Kubernetes: &kubernetes.Flags{Enabled: true, Socket: kubernetes.DefaultSocket, Labels: kubernetes.Labels{DefaultTier: "pro"}, Refresh: time.Second}},
			[]string{"--kubernetes.node-name", "NODE_NAME"}},
		{"kubernetes with a missing kubeconfig", Config{Source: "sim", ScenarioPath: nodeScenario,
			Kubernetes: &kubernetes.Flags{Enabled: true, NodeName: "n", Socket: kubernetes.DefaultSocket, Kubeconfig: filepath.Join(dir, "kubeconfig"),
				Labels: kubernetes.Labels{DefaultTier: "pro"}, Refresh: time.Second}},
			[]string{"--kubernetes.kubeconfig", "kubeconfig"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
			if !usage.Is(err) {
				t.Fatalf("err %v, want a usage error", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not name %q", err, w)
				}
			}
		})
	}
}

func TestSpoolTooSmallIsAUsageError(t *testing.T) {
	cfg := Config{Source: "sim", ScenarioPath: nodeScenario, Fast: true, Brokers: []string{"127.0.0.1:1"},
		SpoolDir: t.TempDir(), SpoolMaxBytes: 10}
	svc, err := New(cfg, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	_, err = svc.Run(context.Background())
	if !usage.Is(err) || !strings.Contains(err.Error(), "--spool.dir") || !strings.Contains(err.Error(), "size limit 10 bytes") {
		t.Errorf("err %v, want a usage error naming --spool.dir and the size limit", err)
	}
}

// Run samples the whole window and returns the samples taken, with the source's own metrics
// registered beside the collector's and the loop's.
func TestRunCountsSamples(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"sim", Config{Source: "sim", ScenarioPath: nodeScenario, Fast: true}},
		{"replay", Config{Source: "replay", Replay: nodeCapture, ReplayFast: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			var ready atomic.Bool
			tc.cfg.Ready = &ready
			svc, err := New(tc.cfg, reg, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			n, err := svc.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if err := svc.Close(); err != nil {
				t.Fatal(err)
			}
			if n != 180 || !ready.Load() {
				t.Errorf("%d samples, ready %v; want 180, true", n, ready.Load())
			}
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			names := map[string]bool{}
			for _, mf := range mfs {
				names[mf.GetName()] = true
			}
			if !names["slicemeter_instance_info"] || !names["slicemeter_exporter_ticks_total"] {
				t.Errorf("the collector's or the loop's metrics are missing: %v", names)
			}
			if !names["slicemeter_exporter_nvml_calls_total"] {
				t.Errorf("the source's metrics are missing: %v", names)
			}
		})
	}
}
