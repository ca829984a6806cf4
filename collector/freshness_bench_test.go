package collector

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// BenchmarkFreshness50k produces 50,000 samples/s for 20 s on a real Kafka broker (715 nodes ×
// 7 instances, one message per node every 100 ms, timestamped now) and reports the p99 of the
// collector's end-to-end lag histogram (sample timestamp → stored), as the upper bound of the
// bucket holding the 99th percentile.
//
//	go test ./collector -run '^$' -bench Freshness50k -benchtime 1x
func BenchmarkFreshness50k(b *testing.B) {
	const nodes, instances, tick, seconds = 715, 7, 100 * time.Millisecond, 20
	brokers := kafkaBroker(b)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := (kafkaconn.Cluster{Brokers: brokers}).EnsureTopics(ctx, 4, pb.TopicSamples, pb.TopicAllocations, pb.TopicDeadLetter); err != nil {
		b.Fatal(err)
	}
	conn := localtest.Database(b, localtest.DatabaseOptions{}).Conn
	reg := prometheus.NewRegistry()
	c, err := New(Config{Brokers: brokers, GroupID: "freshness"}, conn, reg, nil)
	if err != nil {
		b.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()

	w := kafkaconn.Cluster{Brokers: brokers}.NewWriter(pb.TopicSamples, nil)
	defer w.Close()
	b.ResetTimer()
	next := time.Now()
	produced := 0
	for range seconds * int(time.Second/tick) {
		ts := uint64(time.Now().UnixNano())
		msgs := make([]kafka.Message, 0, nodes)
		for n := range nodes {
			batch := &pb.SampleBatch{Node: fmt.Sprintf("node-%04d", n)}
			for i := range instances {
				batch.Samples = append(batch.Samples, sample(pb.Kind_KIND_MIG, fmt.Sprintf("gpu0/mig%d", i), ts))
			}
			v, err := proto.Marshal(batch)
			if err != nil {
				b.Fatal(err)
			}
			msgs = append(msgs, kafka.Message{Key: []byte(batch.Node), Value: v})
		}
		if err := w.WriteMessages(ctx, msgs...); err != nil {
			b.Fatal(err)
		}
		produced += nodes * instances
		next = next.Add(tick)
		time.Sleep(time.Until(next))
	}
	for {
		if s, _ := c.Stored(); s >= uint64(produced) || ctx.Err() != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.StopTimer()
	stop()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	p99 := histogramQuantile(b, reg, "slicemeter_collector_sample_freshness_seconds", 0.99)
	b.ReportMetric(p99, "p99-freshness-s")
	fmt.Printf("freshness: p99 <= %g s at %d samples/s (%d samples)\n", p99, nodes*instances*int(time.Second/tick), produced)
}

// histogramQuantile returns the upper bound of the bucket of histogram name that holds
// quantile q (+Inf when it is in the overflow bucket).
func histogramQuantile(b *testing.B, reg *prometheus.Registry, name string, q float64) float64 {
	families, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		h := f.GetMetric()[0].GetHistogram()
		rank := uint64(math.Ceil(q * float64(h.GetSampleCount())))
		for _, bucket := range h.GetBucket() {
			if bucket.GetCumulativeCount() >= rank {
				return bucket.GetUpperBound()
			}
		}
		return math.Inf(1)
	}
	b.Fatalf("no metric %s", name)
	return 0
}
