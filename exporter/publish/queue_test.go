package publish

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/proto"

	"github.com/slicemeter/slicemeter/exporter/spool"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// late is a Kafka that is not there until up is called: Prepare (ensuring the topic) fails.
type late struct {
	mu       sync.Mutex
	up       bool
	prepares int
}

func (l *late) prepare(context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.prepares++
	if !l.up {
		return errors.New("dial tcp 127.0.0.1:9092: connection refused")
	}
	return nil
}

func (l *late) set()          { l.mu.Lock(); l.up = true; l.mu.Unlock() }
func (l *late) attempts() int { l.mu.Lock(); defer l.mu.Unlock(); return l.prepares }

// Without Kafka at start, flushes are queued (on disk or in memory), nothing is sent before
// Prepare succeeds, Missing says what is missing, and once Kafka appears everything queued is
// delivered in order. The memory queue drops its oldest batches when full, counted.
func TestQueuesUntilKafkaAppears(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"spool", Options{SpoolDir: t.TempDir(), SpoolMaxBytes: 1 << 20}},
		{"memory", Options{MemoryQueueBytes: 1 << 20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &switchWriter{}
			k := &late{}
			tc.opts.Prepare = k.prepare
			reg := prometheus.NewPedanticRegistry()
			p, err := New(w, pb.TopicSamples, reg, slog.New(slog.DiscardHandler), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			p.backoff, p.maxBackoff = time.Millisecond, 5*time.Millisecond
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { p.Run(ctx); close(done) }()
			for ts := uint64(1); ts <= 10; ts++ {
				_ = p.Write(ctx, time.Unix(0, int64(ts)), tick(map[string]int{"node-a": 2}, ts))
				if err := p.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
			for k.attempts() < 2 { // the first failure recorded
				time.Sleep(time.Millisecond)
			}
			if m := p.Missing(); !strings.Contains(m, "kafka: ") || !strings.Contains(m, "connection refused") {
				t.Errorf("Missing() = %q, want it to name Kafka and the error", m)
			}
			if got := testutil.ToFloat64(p.published); got != 0 || w.count() != 0 {
				t.Fatalf("sent %d messages before Prepare succeeded", w.count())
			}
			k.set()
			for w.count() < 10 {
				time.Sleep(time.Millisecond)
			}
			cancel()
			<-done
			if m := p.Missing(); m != "" {
				t.Errorf("Missing() = %q once Kafka took the batches", m)
			}
			for i, m := range w.written {
				if seq := decodeSeq(t, m.Value); seq != uint64(i+1) {
					t.Fatalf("message %d has seq %d: out of order", i, seq)
				}
			}
			if got := testutil.ToFloat64(p.published); got != 20 {
				t.Errorf("published %v samples, want 20", got)
			}
		})
	}
}

func TestMemoryQueueFullDropsOldestCounted(t *testing.T) {
	w := &switchWriter{down: true}
	p, err := New(w, pb.TopicSamples, prometheus.NewRegistry(), slog.New(slog.DiscardHandler), Options{MemoryQueueBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for ts := uint64(1); ts <= 200; ts++ {
		_ = p.Write(ctx, time.Unix(0, int64(ts)), tick(map[string]int{"node-a": 2}, ts))
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	dropped := testutil.ToFloat64(p.dropped.WithLabelValues(spool.ReasonMemoryFull))
	if dropped == 0 || int(dropped)+2*p.spool.Len() != 400 {
		t.Errorf("dropped %v samples with %d batches queued: every sample must be queued or counted", dropped, p.spool.Len())
	}
	dctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := p.Drain(dctx); err == nil || !strings.Contains(err.Error(), "lost: no --spool.dir") {
		t.Errorf("Drain with Kafka down: %v, want it to say the batches are lost", err)
	}
}

func decodeSeq(t *testing.T, value []byte) uint64 {
	t.Helper()
	var b pb.SampleBatch
	if err := proto.Unmarshal(value, &b); err != nil {
		t.Fatal(err)
	}
	return b.Seq
}

// Without a queue, a flush makes sure of the topic (Prepare) before its write.
func TestFlushWithoutQueuePreparesFirst(t *testing.T) {
	w := &switchWriter{}
	k := &late{up: true}
	p, err := New(w, pb.TopicSamples, prometheus.NewRegistry(), slog.New(slog.DiscardHandler), Options{Prepare: k.prepare})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for ts := uint64(1); ts <= 2; ts++ {
		_ = p.Write(ctx, time.Unix(0, int64(ts)), tick(map[string]int{"node-a": 1}, ts))
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if k.attempts() != 1 || w.count() != 2 || p.Missing() != "" {
		t.Errorf("%d prepares, %d written, missing %q; want 1, 2, none", k.attempts(), w.count(), p.Missing())
	}
}
