package service

import (
	"bufio"
	"context"
	"flag"
	"log/slog"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/slicemeter/slicemeter/exporter"
	"github.com/slicemeter/slicemeter/internal/webserver"
)

var update = flag.Bool("update", false, "rewrite testdata/start.metrics (go test ./exporter/service -run TestMetricsAtStart -update)")

// blockedSource holds the first tick's read until ctx ends, signalling that sampling has started.
type blockedSource struct {
	once    sync.Once
	reading chan struct{}
}

func (s *blockedSource) Read(ctx context.Context, _ time.Time, _ time.Duration) ([]exporter.NodeSamples, error) {
	s.once.Do(func() { close(s.reading) })
	<-ctx.Done()
	return nil, ctx.Err()
}

// The exporter's /metrics when sampling has started and no tick has been read yet, as series
// names and label sets (values left out): every counter and gauge of the exporter itself is
// there from the start, at 0, with the label sets known then (drop reasons, NVML calls, sinks,
// refusals, GPUs). The Go and process collectors vary by machine and are left out, and so are
// the build_info labels' values. Regenerate with
//
//	go test ./exporter/service -run TestMetricsAtStart -update
func TestMetricsAtStart(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	reg := webserver.NewRegistry()
	cfg := Config{Source: "sim", ScenarioPath: nodeScenario, Fast: true, Brokers: cluster.ListenAddrs(),
		Partitions: 1, FlushInterval: time.Second, SpoolDir: t.TempDir(), SpoolMaxBytes: 1 << 20}
	svc, err := New(cfg, reg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	blocked := &blockedSource{reading: make(chan struct{})}
	svc.src.Source = blocked
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := svc.Run(ctx); done <- err }()
	select {
	case <-blocked.reading:
	case err := <-done:
		t.Fatalf("the exporter stopped before sampling: %v", err)
	}
	h, err := webserver.MetricsHandler(reg, svc.direct())
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := seriesOf(rec.Body.String())
	const golden = "testdata/start.metrics"
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("the series at start differ from %s (regenerate with -update if intended):\n%s", golden, lineDiff(string(want), got))
	}
}

// seriesOf is an exposition's series (name and labels, without values) of slicemeter's own
// metrics and promhttp's, one a line.
func seriesOf(text string) string {
	var b strings.Builder
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "go_") || strings.HasPrefix(line, "process_") {
			continue
		}
		series := line[:strings.LastIndexByte(line, ' ')]
		if strings.HasPrefix(series, "slicemeter_build_info{") {
			series = "slicemeter_build_info{…}"
		}
		b.WriteString(series + "\n")
	}
	return b.String()
}

// lineDiff lists the lines only in want (-) and only in got (+).
func lineDiff(want, got string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	w, g := in(want), in(got)
	var b strings.Builder
	for _, l := range strings.Split(want, "\n") {
		if !g[l] {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if !w[l] {
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}
