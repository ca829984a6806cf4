package e2e

import (
	"context"
	"encoding/csv"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/e2e/apptest"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// TestCapacityOfANewFleet: a fleet of two H100s that existed for 48 s (1 Hz samples through a
// real broker and the collector binary) is not a month of capacity: the month's report, from
// every sample source, has it as capacity from its first sample to its last plus the presence
// period, an hour, and so as unallocated, since no tenant holds it.
func TestCapacityOfANewFleet(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kfk := localtest.NewKafka(t)
	db := localtest.Database(t, localtest.DatabaseOptions{Name: "e2e_capacity", Unmigrated: true})
	apptest.Migrate(t, ctx, db.DSN)
	brokers := kafkaconn.ParseBrokers(kfk.Brokers())
	if err := (kafkaconn.Cluster{Brokers: brokers}).EnsureTopics(ctx, 1, pb.TopicSamples, pb.TopicAllocations, pb.TopicDeadLetter); err != nil {
		t.Fatal(err)
	}
	col := apptest.StartCollector(t, ctx, "--kafka.brokers", kfk.Brokers(), "--clickhouse.dsn", db.DSN,
		"--collector.flush-interval", "200ms", "--kafka.partitions", "1")

	const seconds = 48
	var msgs []kafka.Message
	for k := range seconds {
		var samples []*pb.Sample
		for gpu, uuid := range []string{"GPU-0", "GPU-1"} {
			samples = append(samples, &pb.Sample{TsNs: faultBase + uint64(k)*1e9, IntervalNs: 1e9, Model: "H100-SXM5-80GB",
				Kind: pb.Kind_KIND_GPU, GpuUuid: uuid, GpuIndex: uint32(gpu), InstanceId: "gpu" + strconv.Itoa(gpu),
				MemTotalBytes: 80 << 30, SmCount: faultGPUSMs, GpuSmCount: faultGPUSMs, GpuMemTotalBytes: 80 << 30})
		}
		v, err := proto.Marshal(&pb.SampleBatch{Node: "node-a", Seq: uint64(k), Samples: samples})
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, kafka.Message{Topic: pb.TopicSamples, Key: []byte("node-a"), Value: v})
	}
	w := kafkaconn.Cluster{Brokers: brokers}.NewWriter("", nil)
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	w.Close()
	// The rollups are written after the raw samples, in the same flush: wait for the minutes'.
	for deadline := time.Now().Add(60 * time.Second); queryUint(t, ctx, db.Conn, "SELECT sum(samples) FROM samples_1m FINAL") != 2*seconds; {
		if time.Now().After(deadline) {
			t.Fatalf("the samples were not stored and rolled up within a minute\n%s", col.LogTail(40))
		}
		time.Sleep(200 * time.Millisecond)
	}

	// Two GPUs at 2.40/h, each from its first sample to 47 s later, plus an hour.
	want := 2 * faultPrice * (47 + 3600) / 3600.
	for _, source := range []string{"raw", "rollup-1s", "rollup-1m"} {
		out := apptest.Report(t, ctx, db.DSN, "--pricebook", faultPriceBook, "--attribution.samples", source,
			"--from", "2026-01-01T00:00:00Z", "--to", "2026-02-01T00:00:00Z").Stdout
		rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
		if err != nil || len(rows) != 2 || rows[1][0] != "__unallocated__" {
			t.Fatalf("report from %s: %v, want the header and __unallocated__ only:\n%s", source, err, out)
		}
		got, err := strconv.ParseFloat(rows[1][5], 64)
		if err != nil || math.Abs(got-want) > 1e-6 {
			t.Errorf("report from %s: unallocated %q, want %.6f (48 s and an hour of two H100s, not a month)", source, rows[1][5], want)
		}
	}
}
