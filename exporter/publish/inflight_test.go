package publish

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"

	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// gateWriter holds every write until the test opens the gate: a Kafka write in flight.
type gateWriter struct {
	entered chan struct{} // told once, when the first write starts
	gate    chan struct{}
	once    sync.Once
	mu      sync.Mutex
	written []kafka.Message
}

func (w *gateWriter) WriteMessages(ctx context.Context, msgs ...kafka.Message) error {
	w.once.Do(func() { close(w.entered) })
	select {
	case <-w.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.written = append(w.written, msgs...)
	return nil
}

// A batch the sender is writing to Kafka when flushes make room by dropping it (the spool
// full, or the memory queue) was delivered: it is counted as published, not also as dropped,
// and the batch after the dropped ones is sent next. Published + dropped = produced, exactly,
// whichever queue. (CI once counted a batch both ways on a loaded machine; this holds the
// write open so that the drop always lands during it.)
func TestBatchDroppedWhileInFlightIsCountedOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts func(t *testing.T) Options
	}{
		{"spool", func(t *testing.T) Options { return Options{SpoolDir: t.TempDir(), SpoolMaxBytes: 64 << 10} }},
		{"memory queue", func(*testing.T) Options { return Options{MemoryQueueBytes: 64 << 10} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &gateWriter{entered: make(chan struct{}), gate: make(chan struct{})}
			p, err := New(w, pb.TopicSamples, prometheus.NewRegistry(), slog.New(slog.DiscardHandler), tc.opts(t))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			p.backoff, p.maxBackoff = time.Millisecond, 5*time.Millisecond
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			const perFlush = 20 // about 1.3 kB a batch
			produced, ts := 0, uint64(0)
			flush := func(n int) {
				for range n {
					ts++
					_ = p.Write(ctx, time.Unix(0, int64(ts)), bigTick(perFlush, ts))
					if err := p.Flush(ctx); err != nil {
						t.Fatal(err)
					}
					produced += perFlush
				}
			}
			flush(1)
			done := make(chan struct{})
			go func() { p.Run(ctx); close(done) }()
			<-w.entered // batch 1 is being written
			flush(200)  // 260 kB through 64 KiB: batch 1 is dropped to make room
			if droppedTotal(p) == 0 {
				t.Fatal("nothing was dropped: the queue never filled")
			}
			close(w.gate)
			for testutil.ToFloat64(p.published)+droppedTotal(p) < float64(produced) {
				if ctx.Err() != nil {
					t.Fatalf("%v published + %v dropped of %d produced: %v", testutil.ToFloat64(p.published), droppedTotal(p), produced, ctx.Err())
				}
				time.Sleep(time.Millisecond)
			}
			cancel()
			<-done
			published := testutil.ToFloat64(p.published)
			if published+droppedTotal(p) != float64(produced) {
				t.Errorf("%v published + %v dropped != %d produced", published, droppedTotal(p), produced)
			}
			if got := float64(len(w.written) * perFlush); got != published {
				t.Errorf("%v samples written to Kafka, %v counted as published", got, published)
			}
			seqs := make([]uint64, len(w.written))
			for i, m := range w.written {
				seqs[i] = decodeSeq(t, m.Value)
			}
			if len(seqs) < 2 || seqs[0] != 1 {
				t.Fatalf("batches written %v: want batch 1 (in flight) first, then the ones kept", seqs)
			}
			if lost := uint64(droppedTotal(p)/perFlush) + 1; seqs[1] != lost+1 {
				t.Errorf("after batch 1 came batch %d, want %d: batches 2..%d were dropped", seqs[1], lost+1, lost)
			}
			for i := 2; i < len(seqs); i++ {
				if seqs[i] != seqs[i-1]+1 {
					t.Errorf("batch %d after batch %d", seqs[i], seqs[i-1])
				}
			}
		})
	}
}
