package publish

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"

	"github.com/slicemeter/slicemeter/exporter"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// smallBroker refuses messages over limit bytes as kafka-go reports the broker's
// MESSAGE_TOO_LARGE (one error per message).
type smallBroker struct {
	mu      sync.Mutex
	limit   int
	refused int
	written []kafka.Message
}

func (b *smallBroker) WriteMessages(_ context.Context, msgs ...kafka.Message) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	errs := make(kafka.WriteErrors, len(msgs))
	failed := false
	for i, m := range msgs {
		if len(m.Key)+len(m.Value) > b.limit {
			errs[i], failed = kafka.MessageSizeTooLarge, true
			b.refused++
		}
	}
	if failed {
		return errs
	}
	b.written = append(b.written, msgs...)
	return nil
}

func (b *smallBroker) samples(t *testing.T) (n int, seqs []uint64) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, m := range b.written {
		var sb pb.SampleBatch
		if err := proto.Unmarshal(m.Value, &sb); err != nil {
			t.Fatal(err)
		}
		n += len(sb.Samples)
		seqs = append(seqs, sb.Seq)
	}
	return n, seqs
}

func bigTick(n int, ts uint64) []exporter.NodeSamples {
	s := make([]*pb.Sample, n)
	for i := range s {
		s[i] = &pb.Sample{TsNs: ts, InstanceId: strings.Repeat("x", 40) + string(rune('a'+i%26)), Model: "H100-SXM5-80GB"}
	}
	return []exporter.NodeSamples{{Node: "node-a", Samples: s}}
}

// A batch larger than the topic's max.message.bytes is split to fit before it is sent, and
// one Kafka refuses as too large anyway (spooled before the limit was known, or a limit lower
// than said) is split on the way out: never an outage, nothing dropped, nothing stuck.
func TestOversizedBatchesAreSplit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		known int64 // SetMaxMessageBytes; 0: not known, the broker refuses
		spool bool
	}{
		{"limit known", 4096, false},
		{"refused by the broker, no spool", 0, false},
		{"refused by the broker, spooled", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			broker := &smallBroker{limit: 4096 - messageOverhead}
			opts := Options{}
			if tc.spool {
				opts.SpoolDir, opts.SpoolMaxBytes = t.TempDir(), 1<<20
			}
			p, err := New(broker, pb.TopicSamples, prometheus.NewRegistry(), slog.New(slog.DiscardHandler), opts)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if tc.known > 0 {
				p.SetMaxMessageBytes(tc.known)
			}
			ctx := context.Background()
			for ts := uint64(1); ts <= 3; ts++ {
				_ = p.Write(ctx, time.Unix(0, int64(ts)), bigTick(300, ts))
				if err := p.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.Drain(ctx); err != nil {
				t.Fatal(err)
			}
			n, seqs := broker.samples(t)
			if n != 900 {
				t.Errorf("%d samples delivered, want 900", n)
			}
			for i := 1; i < len(seqs); i++ {
				if seqs[i] <= seqs[i-1] {
					t.Fatalf("seq %d after %d: split batches out of order", seqs[i], seqs[i-1])
				}
			}
			if len(seqs) < 6 {
				t.Errorf("%d messages: the batches were not split", len(seqs))
			}
			if tc.known > 0 && broker.refused != 0 {
				t.Errorf("%d messages refused although the limit was known", broker.refused)
			}
			var dropped float64
			for _, r := range DropReasons() {
				dropped += testutil.ToFloat64(p.dropped.WithLabelValues(r))
			}
			if dropped != 0 || p.Missing() != "" {
				t.Errorf("dropped %v, missing %q: a batch too large is neither a loss nor an outage", dropped, p.Missing())
			}
		})
	}
}

// A single sample larger than Kafka accepts is dropped and counted; what follows is delivered.
func TestSampleTooLargeIsDroppedCounted(t *testing.T) {
	broker := &smallBroker{limit: 200}
	p, err := New(broker, pb.TopicSamples, prometheus.NewRegistry(), slog.New(slog.DiscardHandler), Options{SpoolDir: t.TempDir(), SpoolMaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	huge := []exporter.NodeSamples{{Node: "node-a", Samples: []*pb.Sample{{TsNs: 1, InstanceId: strings.Repeat("y", 500)}}}}
	_ = p.Write(ctx, time.Unix(0, 1), huge)
	_ = p.Flush(ctx)
	_ = p.Write(ctx, time.Unix(0, 2), tick(map[string]int{"node-a": 1}, 2))
	_ = p.Flush(ctx)
	if err := p.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(p.dropped.WithLabelValues(ReasonTooLarge)); got != 1 {
		t.Errorf("%v samples counted as %s, want 1", got, ReasonTooLarge)
	}
	if n, _ := broker.samples(t); n != 1 || p.spool.Len() != 0 {
		t.Errorf("%d samples delivered, %d batches spooled; want the next one delivered, none stuck", n, p.spool.Len())
	}
}
