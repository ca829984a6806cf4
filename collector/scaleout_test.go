package collector

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// TestTwoCollectorsSplitPartitions runs two collectors in one consumer group on a real broker
// with a 4-partition topic: both get partitions and store samples, and together they store each sample once.
func TestTwoCollectorsSplitPartitions(t *testing.T) {
	// A real broker: the group protocol (join, sync, rebalance) is what is tested here.
	brokers := kafkaBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := (kafkaconn.Cluster{Brokers: brokers}).EnsureTopics(ctx, 4, pb.TopicSamples, pb.TopicAllocations, pb.TopicDeadLetter); err != nil {
		t.Fatal(err)
	}
	conn := localtest.Database(t, localtest.DatabaseOptions{}).Conn
	cfg := Config{Brokers: brokers, GroupID: "scaleout", FlushInterval: 100 * time.Millisecond}
	a, regA, stopA := startCollector(t, cfg, conn)
	b, regB, stopB := startCollector(t, cfg, conn)

	// Produce rounds (16 nodes, so every partition gets keys) until both collectors stored
	// some: the group may still be balancing at first.
	produced := 0
	deadline := time.Now().Add(45 * time.Second)
	for round := 0; ; round++ {
		for n := range 16 {
			batch := &pb.SampleBatch{Node: fmt.Sprintf("node-%02d", n), Samples: []*pb.Sample{
				sample(pb.Kind_KIND_GPU, "gpu0", base+uint64(round)*100_000_000)}}
			produce(t, brokers, sampleMessage(t, batch))
			produced++
		}
		sa, _ := a.Stored()
		sb, _ := b.Stored()
		if sa > 0 && sb > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d rounds: collector A stored %d, B %d; want both > 0", round+1, sa, sb)
		}
		time.Sleep(200 * time.Millisecond)
	}
	deadline = time.Now().Add(60 * time.Second)
	for {
		var n uint64
		err := conn.QueryRow(ctx, "SELECT count() FROM (SELECT DISTINCT node, instance_id, ts_ns FROM samples)").Scan(&n)
		if err == nil && n == uint64(produced) {
			break
		}
		if time.Now().After(deadline) {
			sa, _ := a.Stored()
			sb, _ := b.Stored()
			t.Fatalf("%d of %d samples stored (err %v); A stored %d, pending %v, commit errors %v; B stored %d, pending %v, commit errors %v",
				n, produced, err, sa, metricValue(t, regA, "slicemeter_collector_pending_messages", nil),
				metricValue(t, regA, "slicemeter_collector_commit_errors_total", nil),
				sb, metricValue(t, regB, "slicemeter_collector_pending_messages", nil),
				metricValue(t, regB, "slicemeter_collector_commit_errors_total", nil))
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, stop := range []func() error{stopA, stopB} {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}
	sa, _ := a.Stored()
	sb, _ := b.Stored()
	t.Logf("produced %d; A stored %d, B stored %d", produced, sa, sb)
	// A partition moves only at a rebalance; what moved with uncommitted offsets is stored
	// twice, never more than that.
	if sa+sb < uint64(produced) || sa+sb > 2*uint64(produced) {
		t.Errorf("A stored %d + B stored %d for %d produced", sa, sb, produced)
	}
	var s1 uint64
	if err := conn.QueryRow(ctx, `SELECT sum(samples) FROM (SELECT samples FROM samples_1s
        ORDER BY samples DESC LIMIT 1 BY node, instance_id, time)`).Scan(&s1); err != nil || s1 != uint64(produced) {
		t.Errorf("samples_1s counts %d samples (err %v), want %d", s1, err, produced)
	}
}
