package publish

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"

	"github.com/slicemeter/slicemeter/exporter"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

type fakeWriter struct {
	failures int // fail this many calls first
	calls    int
	written  []kafka.Message
}

func (w *fakeWriter) WriteMessages(_ context.Context, msgs ...kafka.Message) error {
	w.calls++
	if w.calls <= w.failures {
		return errors.New("kafka: broker not available")
	}
	w.written = append(w.written, msgs...)
	return nil
}

func tick(nodes map[string]int, ts uint64) []exporter.NodeSamples {
	var out []exporter.NodeSamples
	for _, node := range []string{"node-a", "node-b"} {
		n := nodes[node]
		ns := exporter.NodeSamples{Node: node}
		for i := 0; i < n; i++ {
			ns.Samples = append(ns.Samples, &pb.Sample{TsNs: ts, InstanceId: "gpu" + string(rune('0'+i))})
		}
		if n > 0 {
			out = append(out, ns)
		}
	}
	return out
}

func TestBatchPerNodePerFlush(t *testing.T) {
	w := &fakeWriter{}
	reg := prometheus.NewRegistry()
	p, err := New(w, pb.TopicSamples, reg, slog.New(slog.DiscardHandler), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for ts := uint64(1); ts <= 3; ts++ {
		if err := p.Write(ctx, time.Unix(0, int64(ts)), tick(map[string]int{"node-a": 2, "node-b": 1}, ts)); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if len(w.written) != 2 {
		t.Fatalf("%d messages, want one per node", len(w.written))
	}
	var seqs []uint64
	for _, m := range w.written {
		var b pb.SampleBatch
		if err := proto.Unmarshal(m.Value, &b); err != nil {
			t.Fatal(err)
		}
		if string(m.Key) != b.Node || m.Topic != pb.TopicSamples {
			t.Errorf("key %q topic %q for node %q", m.Key, m.Topic, b.Node)
		}
		want := map[string]int{"node-a": 6, "node-b": 3}[b.Node]
		if len(b.Samples) != want {
			t.Errorf("%s: %d samples, want %d", b.Node, len(b.Samples), want)
		}
		seqs = append(seqs, b.Seq)
	}
	if seqs[0] == seqs[1] {
		t.Errorf("batches share seq %d", seqs[0])
	}
	// Nothing pending: no message.
	if err := p.Flush(ctx); err != nil || len(w.written) != 2 {
		t.Errorf("empty flush wrote: %v, %d messages", err, len(w.written))
	}
	if got := testutil.ToFloat64(p.published); got != 9 {
		t.Errorf("published %v, want 9", got)
	}
}

func TestRetriesThenDropsAndCounts(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		failures    int
		wantErr     bool
		wantDropped float64
	}{{failures: 2}, {failures: 100, wantErr: true, wantDropped: 3}} {
		w := &fakeWriter{failures: tt.failures}
		p, err := New(w, pb.TopicSamples, nil, slog.New(slog.DiscardHandler), Options{})
		if err != nil {
			t.Fatal(err)
		}
		p.backoff = time.Millisecond
		_ = p.Write(ctx, time.Time{}, tick(map[string]int{"node-a": 3}, 1))
		err = p.Flush(ctx)
		if (err != nil) != tt.wantErr {
			t.Fatalf("failures %d: err %v", tt.failures, err)
		}
		if err != nil && !strings.Contains(err.Error(), "3 samples") {
			t.Errorf("error does not say what was dropped: %v", err)
		}
		if got := testutil.ToFloat64(p.dropped.WithLabelValues("kafka_unavailable")); got != tt.wantDropped {
			t.Errorf("dropped %v, want %v", got, tt.wantDropped)
		}
		if got := testutil.ToFloat64(p.errors); got != float64(min(tt.failures, p.retries+1)) {
			t.Errorf("publish errors %v", got)
		}
	}
}

// Every drop reason's series exists at 0 before any drop.
func TestDropReasonsExistFromTheStart(t *testing.T) {
	p, err := New(&fakeWriter{}, pb.TopicSamples, prometheus.NewRegistry(), slog.New(slog.DiscardHandler), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := testutil.CollectAndCount(p.dropped), len(DropReasons()); got != want || want != 7 {
		t.Errorf("%d samples_dropped_total series at start, want %d (7 reasons)", got, want)
	}
	for _, r := range DropReasons() {
		if v := testutil.ToFloat64(p.dropped.WithLabelValues(r)); v != 0 {
			t.Errorf("samples_dropped_total{reason=%q} = %v at start", r, v)
		}
	}
}
