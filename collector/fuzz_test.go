package collector

import (
	"log/slog"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"

	"github.com/slicemeter/slicemeter/internal/lograte"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// FuzzProcess feeds arbitrary message values to the decoders: whatever arrives, the collector
// must neither panic nor lose track of it — every message becomes rows or a dead letter.
func FuzzProcess(f *testing.F) {
	batch, _ := proto.Marshal(&pb.SampleBatch{Node: "n", Samples: []*pb.Sample{{
		TsNs: 1767571200000000000, IntervalNs: 1e8, InstanceId: "gpu0", Kind: pb.Kind_KIND_GPU,
		Vgpu: &pb.VgpuSchedule{WaitsNs: []uint64{4060000}},
	}}})
	alloc, _ := proto.Marshal(&pb.AllocationEvent{AllocationId: "a", Tenant: "t", Tier: "pro", Node: "n",
		InstanceId: "gpu0", RequestedAtNs: allocT0 + 1, StartedAtNs: allocT0 + 2, EndedAtNs: allocT0 + 3, Version: 1})
	for _, v := range [][]byte{batch, alloc, nil, {0xff}, []byte("not protobuf")} {
		f.Add(v, true)
		f.Add(v, false)
	}
	m, err := newMetrics(nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, value []byte, samples bool) {
		log := slog.New(slog.DiscardHandler)
		c := &Collector{log: log, refusals: lograte.New(log, time.Minute), metrics: m, batch: newBatch()}
		topic := pb.TopicAllocations
		if samples {
			topic = pb.TopicSamples
		}
		c.process(kafka.Message{Topic: topic, Value: value}, time.Now())
		if c.samples.len()+c.allocs.len()+len(c.deadLetters) == 0 {
			// Only an empty-but-valid batch may produce nothing.
			var b pb.SampleBatch
			if !samples || proto.Unmarshal(value, &b) != nil || b.GetNode() == "" || len(b.GetSamples()) != 0 {
				t.Fatalf("message on %s vanished: %x", topic, value)
			}
		}
	})
}
