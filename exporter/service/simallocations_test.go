package service

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"google.golang.org/protobuf/proto"

	"github.com/slicemeter/slicemeter/exporter"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

func TestSimRepetition(t *testing.T) {
	sc, err := LoadScenario("testdata/loop.yaml")
	if err != nil {
		t.Fatal(err)
	}
	start := sc.Start.UnixNano()
	for _, c := range []struct {
		name      string
		node      string
		k         int
		wantID    string
		wantStart int64
		wantN     int
	}{
		{"first repetition as the scenario says", "", 0, "loop-node/a/0", start + 200e6, 1},
		{"third repetition shifted by two durations", "", 2, "loop-node/a/0/loop2", start + 2*500e6 + 200e6, 1},
		{"its own node", "node-l", 0, "loop-node/a/0", start + 200e6, 1},
		{"another node's exporter announces none of it", "node-x", 0, "", 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := simRepetition(sc, c.node, c.k)
			if len(got) != c.wantN {
				t.Fatalf("%d events, want %d", len(got), c.wantN)
			}
			if c.wantN == 0 {
				return
			}
			e := got[0]
			if e.AllocationId != c.wantID || e.StartedAtNs != c.wantStart || e.Tenant != "a" || e.Tier != "pro" ||
				e.Node != "node-l" || e.InstanceId != "gpu0/mig0" || e.EndedAtNs-e.StartedAtNs != 200e6 || e.Version != 1 {
				t.Errorf("event %+v", e)
			}
		})
	}
	// The scenario's own events are not changed by a shifted repetition.
	if e := simRepetition(sc, "", 0)[0]; e.AllocationId != "loop-node/a/0" {
		t.Errorf("repetition 0 after repetition 2: %s", e.AllocationId)
	}
}

// fakeWriter fails its first `fail` writes, then keeps what it is given.
type fakeWriter struct {
	mu   sync.Mutex
	fail int
	got  []kafka.Message
}

func (w *fakeWriter) WriteMessages(_ context.Context, msgs ...kafka.Message) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fail > 0 {
		w.fail--
		return errors.New("broker not reachable")
	}
	w.got = append(w.got, msgs...)
	return nil
}

func (w *fakeWriter) ids(t *testing.T) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var ids []string
	for _, m := range w.got {
		if m.Topic != pb.TopicAllocations {
			t.Errorf("message on topic %q, want %s", m.Topic, pb.TopicAllocations)
		}
		var e pb.AllocationEvent
		if err := proto.Unmarshal(m.Value, &e); err != nil {
			t.Fatal(err)
		}
		if string(m.Key) != e.Tenant {
			t.Errorf("key %q, want the tenant %q", m.Key, e.Tenant)
		}
		ids = append(ids, e.AllocationId)
	}
	return ids
}

// TestSimSchedulerPublishesEveryRepetition: the looping scenario's allocations are published
// once per repetition as the simulated clock reaches it, through a failed first try.
func TestSimSchedulerPublishesEveryRepetition(t *testing.T) {
	sc, err := LoadScenario("testdata/loop.yaml")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m := newSimAllocationMetrics(reg)
	w := &fakeWriter{fail: 1}
	p := &simScheduler{sc: sc, w: topicWriter{w}, clock: exporter.FastClock{}, retry: 10 * time.Millisecond, metrics: m,
		logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.run(ctx) }()
	deadline := time.Now().Add(20 * time.Second)
	for len(w.ids(t)) < 3 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	<-done
	ids := w.ids(t)
	if len(ids) < 3 || ids[0] != "loop-node/a/0" || ids[1] != "loop-node/a/0/loop1" || ids[2] != "loop-node/a/0/loop2" {
		t.Fatalf("published %v, want loop-node/a/0, …/loop1, …/loop2 in order", ids)
	}
	if got := testutil.ToFloat64(m.errors); got != 1 {
		t.Errorf("publish errors %v, want 1 (the failed first try)", got)
	}
	if got := testutil.ToFloat64(m.published); got != float64(len(ids)) {
		t.Errorf("published counter %v, want %d", got, len(ids))
	}
}

// TestSimSchedulerOnce: a scenario that does not loop is announced once.
func TestSimSchedulerOnce(t *testing.T) {
	sc, err := LoadScenario("testdata/loop.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sc.Loop = false
	w := &fakeWriter{}
	p := &simScheduler{sc: sc, w: topicWriter{w}, clock: exporter.FastClock{}, metrics: newSimAllocationMetrics(prometheus.NewRegistry()),
		logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	p.run(context.Background()) // returns by itself
	if ids := w.ids(t); len(ids) != 1 || ids[0] != "loop-node/a/0" {
		t.Fatalf("published %v, want loop-node/a/0 once", ids)
	}
}

// TestSimSchedulerMetricsWithTheSourceImplied: `slicemeter exporter --scenario X
// --kafka.brokers …` without --source is a sim source (SourceOf) and publishes the scenario's
// allocations; its counters must exist then too (before: New looked at the --source flag as
// given, left them nil, and the first publish panicked).
func TestSimSchedulerMetricsWithTheSourceImplied(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	reg := prometheus.NewRegistry()
	cfg := Config{ScenarioPath: "testdata/loop.yaml", SimAllocations: true, SimStart: "now", Brokers: cluster.ListenAddrs(),
		Partitions: 1, FlushInterval: time.Second, QueueMaxBytes: 1 << 20}
	svc, err := New(cfg, reg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := svc.Run(ctx); done <- err }()
	published := func() float64 {
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == "slicemeter_exporter_sim_allocations_published_total" {
				return f.GetMetric()[0].GetCounter().GetValue()
			}
		}
		return -1
	}
	deadline := time.Now().Add(20 * time.Second)
	for published() <= 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	got := published()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got <= 0 {
		t.Fatalf("slicemeter_exporter_sim_allocations_published_total = %v, want > 0 (-1: not registered)", got)
	}
}
