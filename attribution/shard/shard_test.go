package shard

import (
	"context"
	"log/slog"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
)

func TestMain(m *testing.M) { localtest.Main(m) }

// TestPartition pins the mapping: replicas of different versions must agree on it.
func TestPartition(t *testing.T) {
	for _, tt := range []struct {
		node       string
		partitions int
		want       int
	}{
		{"node-a", 64, 19}, // FNV-1a 32: 79934867
		{"node-b", 64, 38}, // 96712486
		{"gpu-host-0001", 64, 18},
		{"gpu-host-0001", 7, 4}, // 1233955538
		{"", 64, 5},             // the offset basis, 2166136261
		{"ñode", 64, 53},        // the UTF-8 bytes
		{"node-a", 1, 0},
	} {
		if got := Partition(tt.node, tt.partitions); got != tt.want {
			t.Errorf("Partition(%q, %d) = %d, want %d", tt.node, tt.partitions, got, tt.want)
		}
	}
}

func TestIDRanges(t *testing.T) {
	for _, tt := range []struct {
		ids  []int
		want string
	}{{nil, ""}, {[]int{3}, "3"}, {[]int{0, 1, 2, 5, 7, 8}, "0-2,5,7-8"}} {
		if got := idRanges(tt.ids); got != tt.want {
			t.Errorf("idRanges(%v) = %q, want %q", tt.ids, got, tt.want)
		}
	}
}

// TestNilGroup: no sharding is one replica owning every node.
func TestNilGroup(t *testing.T) {
	var g *Group
	a, ok := g.Assignment()
	if !ok || !a.Owns("node-a") || g.Close() != nil {
		t.Errorf("nil group: ok %v", ok)
	}
}

// TestUnreachable: with no broker to join, the replica owns nothing, its metrics exist
// already (and pass promtool), and Close returns.
func TestUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	reg := prometheus.NewRegistry()
	g, err := Start(context.Background(), Config{Cluster: kafkaconn.Cluster{Brokers: []string{addr}}, Group: "g", Topic: "t", Partitions: 4, SessionTimeout: 6 * time.Second},
		slog.New(slog.DiscardHandler), reg)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := g.Assignment(); ok {
		t.Error("owns nodes without having joined")
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, mf := range families {
		if _, err := expfmt.MetricFamilyToText(&text, mf); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"slicemeter_attribution_shard_partitions 0", "slicemeter_attribution_shard_generation 0", "slicemeter_attribution_shard_rebalances_total 0"} {
		if !strings.Contains(text.String(), name+"\n") {
			t.Errorf("metrics lack %q:\n%s", name, text.String())
		}
	}
	if err := g.Close(); err != nil {
		t.Error(err)
	}
	if _, ok := g.Assignment(); ok {
		t.Error("owns nodes after Close")
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if testing.Short() {
			t.Skip("promtool not installed")
		}
		t.Fatal("promtool not found: run make deps (Debian package prometheus)")
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(text.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
	if _, err := Start(context.Background(), Config{Cluster: kafkaconn.Cluster{Brokers: []string{addr}}, Group: "g", Topic: "t", Partitions: 4, SessionTimeout: time.Second},
		slog.New(slog.DiscardHandler), reg); err == nil {
		t.Error("a second group registered the same metrics")
	}
}

// TestStartChecks: a config Flags.Config would refuse is an error, never a background loop.
func TestStartChecks(t *testing.T) {
	ok := Config{Cluster: kafkaconn.Cluster{Brokers: []string{"k:9092"}}, Group: "g", Topic: "t", Partitions: 1, SessionTimeout: time.Second}
	for _, bad := range []func(*Config){
		func(c *Config) { c.Cluster.Brokers = nil },
		func(c *Config) { c.Group = "" },
		func(c *Config) { c.Topic = "" },
		func(c *Config) { c.Partitions = 0 },
		func(c *Config) { c.SessionTimeout = 0 },
	} {
		cfg := ok
		bad(&cfg)
		if g, err := Start(context.Background(), cfg, slog.New(slog.DiscardHandler), nil); err == nil {
			_ = g.Close()
			t.Errorf("Start(%+v) started", cfg)
		}
	}
}
