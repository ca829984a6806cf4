package exporter_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sort"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/protobuf/proto"

	"github.com/slicemeter/slicemeter/exporter"
	"github.com/slicemeter/slicemeter/exporter/nvmlsource"
	"github.com/slicemeter/slicemeter/exporter/sim"
	"github.com/slicemeter/slicemeter/exporter/snapshot"
	"github.com/slicemeter/slicemeter/schemas/scenario"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// The target node: 72 instances at 100 ms. The figures are benchmark metrics, not
// assertions (the machine running tests is shared): run
//   go test -run '^$' -bench Node72 -benchtime 3000x ./exporter/
// and read cpu-%-of-core@100ms, ns/instance-sample, nvml-calls/tick, scrape-p99-ms and
// wire-bytes/sample. The exporter process's RSS is measured on the binary (see the issue's
// closing note): a benchmark's process holds the test binary's own baggage.

func node72(b *testing.B) (*scenario.Scenario, *sim.Source, *snapshot.Snapshot, *prometheus.Registry) {
	b.Helper()
	sc, err := scenario.Load("testdata/node72.yaml")
	if err != nil {
		b.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	src, err := sim.NewWithMetrics(sc, "", nvmlsource.NewMetrics(reg), nil)
	if err != nil {
		b.Fatal(err)
	}
	if src.Instances() != 72 {
		b.Fatalf("%d instances, want 72", src.Instances())
	}
	snap := snapshot.New()
	reg.MustRegister(snap)
	return sc, src, snap, reg
}

// BenchmarkNode72Tick is one tick of the whole node: every NVML call of the nvml source
// (simulated NVML underneath), the translation, and the Prometheus snapshot.
func BenchmarkNode72Tick(b *testing.B) {
	sc, src, snap, _ := node72(b)
	ctx := context.Background()
	tick := func(n int) {
		t := sc.Start.Add(time.Duration(n) * sc.Interval)
		out, err := src.Read(ctx, t, sc.Interval)
		if err != nil {
			b.Fatal(err)
		}
		if err := snap.Write(ctx, t, out); err != nil {
			b.Fatal(err)
		}
	}
	tick(0) // opens the nvml source
	calls0 := src.NVMLCalls()
	n := 1
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		tick(n)
		n++
	}
	b.StopTimer()
	perTick := float64(b.Elapsed().Nanoseconds()) / float64(n-1)
	b.ReportMetric(perTick/72, "ns/instance-sample")
	b.ReportMetric(100*perTick/float64(sc.Interval.Nanoseconds()), "cpu-%-of-core@100ms")
	b.ReportMetric(float64(src.NVMLCalls()-calls0)/float64(n-1), "nvml-calls/tick")
}

// BenchmarkNode72Scrape serves /metrics for the 72-instance snapshot: the scrape path reads the
// snapshot only, never NVML.
func BenchmarkNode72Scrape(b *testing.B) {
	sc, src, snap, reg := node72(b)
	ctx := context.Background()
	for n := range 20 {
		t := sc.Start.Add(time.Duration(n) * sc.Interval)
		out, err := src.Read(ctx, t, sc.Interval)
		if err != nil {
			b.Fatal(err)
		}
		if err := snap.Write(ctx, t, out); err != nil {
			b.Fatal(err)
		}
	}
	h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	var took []time.Duration
	var size int
	for b.Loop() {
		began := time.Now()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		took = append(took, time.Since(began))
		size = rec.Body.Len()
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "scrape-p99-ms")
	b.ReportMetric(float64(size), "body-bytes")
}

// BenchmarkNode72Wire encodes one second of the node (a flush) as Kafka carries it: one
// SampleBatch, zstd-compressed.
func BenchmarkNode72Wire(b *testing.B) {
	sc, src, _, _ := node72(b)
	ctx := context.Background()
	var samples []*pb.Sample
	for n := range 10 {
		out, err := src.Read(ctx, sc.Start.Add(time.Duration(n)*sc.Interval), sc.Interval)
		if err != nil {
			b.Fatal(err)
		}
		for _, ns := range out {
			samples = append(samples, ns.Samples...)
		}
	}
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		b.Fatal(err)
	}
	var wire int
	for b.Loop() {
		raw, err := proto.Marshal(&pb.SampleBatch{Node: "node-72", Seq: 1, ExporterId: "bench", Samples: samples})
		if err != nil {
			b.Fatal(err)
		}
		wire = len(enc.EncodeAll(raw, nil))
	}
	b.ReportMetric(float64(wire)/float64(len(samples)), "wire-bytes/sample")
}

var _ exporter.Source = (*sim.Source)(nil)
