package publish

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/slicemeter/slicemeter/exporter"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// discardWriter takes every write, as a broker that is always there.
type discardWriter struct{ bytes int }

func (w *discardWriter) WriteMessages(_ context.Context, msgs ...kafka.Message) error {
	for _, m := range msgs {
		w.bytes += len(m.Value)
	}
	return nil
}

// BenchmarkFlushNode72 is the publishing path's own work for one flush of the 72-instance node
// (8 A100 × 7 MIG + 2 H100 × 8 vGPU, ten ticks at 100 ms): buffering the ticks and encoding
// the batch, the writer taking it as a reachable broker does. What a real broker costs beyond
// (kafka-go's request encoding and compression) is not in it.
//
//	go test -run '^$' -bench FlushNode72 -benchmem ./exporter/publish/
func BenchmarkFlushNode72(b *testing.B) {
	ticks := make([][]exporter.NodeSamples, 10)
	for t := range ticks {
		ts := uint64(time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC).UnixNano()) + uint64(t)*1e8
		ns := exporter.NodeSamples{Node: "node-72"}
		for g := range 10 {
			kind, n, profile := pb.Kind_KIND_MIG, 7, "1g.5gb"
			if g >= 8 {
				kind, n, profile = pb.Kind_KIND_VGPU, 8, "H100-10C"
			}
			for i := range n {
				s := &pb.Sample{
					TsNs: ts, IntervalNs: 1e8, GpuUuid: fmt.Sprintf("GPU-%08x-b7a3-313f-a045-5cfa84fa9c51", g),
					GpuIndex: uint32(g), Model: "A100-SXM4-40GB", Kind: kind, InstanceId: fmt.Sprintf("gpu%d/mig%d", g, i),
					Profile: profile, Attached: true, SmActive: 0.5, MemUsedBytes: 2 << 30, MemTotalBytes: 5 << 30,
					PowerWatts: 250, ComputeSlices: 1, SmCount: 14, GpuSmCount: 108, GpuMemTotalBytes: 40 << 30,
				}
				if kind == pb.Kind_KIND_VGPU {
					s.Vgpu = &pb.VgpuSchedule{RunNs: 12e6, SwitchNs: 1e6, WaitsNs: []uint64{14e6, 14e6, 14e6, 14e6, 14e6, 14e6}}
				}
				ns.Samples = append(ns.Samples, s)
			}
		}
		ticks[t] = []exporter.NodeSamples{ns}
	}
	w := &discardWriter{}
	p, err := New(w, pb.TopicSamples, prometheus.NewRegistry(), slog.New(slog.DiscardHandler), Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		for _, t := range ticks {
			if err := p.Write(ctx, time.Time{}, t); err != nil {
				b.Fatal(err)
			}
		}
		if err := p.Flush(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(w.bytes)/float64(b.N), "bytes/flush")
}
