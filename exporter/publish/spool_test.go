package publish

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/protobuf/proto"

	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// switchWriter is a Kafka that can be down.
type switchWriter struct {
	mu      sync.Mutex
	down    bool
	written []kafka.Message
}

func (w *switchWriter) WriteMessages(_ context.Context, msgs ...kafka.Message) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.down {
		return errors.New("dial tcp: connection refused")
	}
	w.written = append(w.written, msgs...)
	return nil
}

func (w *switchWriter) set(down bool) { w.mu.Lock(); w.down = down; w.mu.Unlock() }
func (w *switchWriter) count() int    { w.mu.Lock(); defer w.mu.Unlock(); return len(w.written) }

func TestSpoolKeepsOrderThroughAnOutage(t *testing.T) {
	w := &switchWriter{down: true}
	reg := prometheus.NewRegistry()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	p, err := New(w, pb.TopicSamples, reg, slog.New(slog.DiscardHandler), Options{SpoolDir: t.TempDir(), SpoolMaxBytes: 1 << 20, Tracer: tp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	sp := p.spool
	p.backoff = time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()

	for ts := uint64(1); ts <= 20; ts++ {
		if err := p.Write(ctx, time.Unix(0, int64(ts)), tick(map[string]int{"node-a": 3}, ts)); err != nil {
			t.Fatal(err)
		}
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(20 * time.Millisecond)
	if w.count() != 0 || sp.Len() != 20 {
		t.Fatalf("while Kafka is down: %d written, %d spooled; want 0 and 20", w.count(), sp.Len())
	}
	w.set(false)
	deadline := time.Now().Add(5 * time.Second)
	for w.count() < 20 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	if w.count() != 20 || sp.Len() != 0 {
		t.Fatalf("after Kafka is back: %d written, %d spooled; want 20 and 0", w.count(), sp.Len())
	}
	for i, m := range w.written {
		var b pb.SampleBatch
		if err := proto.Unmarshal(m.Value, &b); err != nil {
			t.Fatal(err)
		}
		if b.Seq != uint64(i+1) || b.Samples[0].TsNs != uint64(i+1) || string(m.Key) != "node-a" || m.Topic != pb.TopicSamples {
			t.Fatalf("message %d: seq %d ts %d key %s: out of order or altered", i, b.Seq, b.Samples[0].TsNs, m.Key)
		}
	}
	if got := testutil.ToFloat64(p.published); got != 60 {
		t.Errorf("published %v samples, want 60", got)
	}
	names := map[string]int{}
	for _, s := range rec.Ended() {
		names[s.Name()]++
	}
	if names["publish.flush"] != 20 || names["spool.drain"] == 0 || names["kafka.write"] < 21 {
		t.Errorf("spans %v: want 20 flushes, drains, and the failed and successful writes", names)
	}
}

func TestSpoolFullDropsOldestCounted(t *testing.T) {
	w := &switchWriter{down: true}
	reg := prometheus.NewRegistry()
	p, err := New(w, pb.TopicSamples, reg, slog.New(slog.DiscardHandler), Options{SpoolDir: t.TempDir(), SpoolMaxBytes: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	sp := p.spool
	ctx := context.Background()
	for ts := uint64(1); ts <= 200; ts++ {
		_ = p.Write(ctx, time.Unix(0, int64(ts)), tick(map[string]int{"node-a": 2}, ts))
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	dropped := testutil.ToFloat64(p.dropped.WithLabelValues("spool_full"))
	if dropped == 0 || int(dropped)+2*sp.Len() != 400 {
		t.Errorf("dropped %v samples with %d batches spooled: every sample must be spooled or counted", dropped, sp.Len())
	}
	w.set(false)
	if err := p.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	var first pb.SampleBatch
	if err := proto.Unmarshal(w.written[0].Value, &first); err != nil {
		t.Fatal(err)
	}
	if want := uint64(200 - len(w.written) + 1); first.Seq != want {
		t.Errorf("oldest delivered seq %d, want %d: the newest batches survive", first.Seq, want)
	}
}

// TestSpoolFullLogsOnce: a full spool drops a batch at every flush; that is one log line per
// minute with the count so far, not one per batch (6,814 WARN lines in 4 s before).
func TestSpoolFullLogsOnce(t *testing.T) {
	w := &switchWriter{down: true}
	var buf syncBuffer
	p, err := New(w, pb.TopicSamples, prometheus.NewRegistry(), slog.New(slog.NewTextHandler(&buf, nil)), Options{SpoolDir: t.TempDir(), SpoolMaxBytes: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	ctx := context.Background()
	for ts := uint64(1); ts <= 200; ts++ {
		_ = p.Write(ctx, time.Unix(0, int64(ts)), tick(map[string]int{"node-a": 2}, ts))
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	dropped := testutil.ToFloat64(p.dropped.WithLabelValues("spool_full"))
	if dropped < 100 {
		t.Fatalf("only %v samples dropped; the test needs a spool that overflows", dropped)
	}
	if n := strings.Count(buf.String(), "samples dropped from the Kafka spool"); n != 1 {
		t.Errorf("%d lines for %v dropped samples within a minute, want 1:\n%.2000s", n, dropped, buf.String())
	}
}

// syncBuffer is a bytes.Buffer safe for the sender's goroutine and the test's.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }
