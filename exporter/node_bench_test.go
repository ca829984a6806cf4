package exporter_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/protobuf/proto"

	"github.com/slicemeter/slicemeter/exporter"
	"github.com/slicemeter/slicemeter/exporter/nvmlsource"
	"github.com/slicemeter/slicemeter/exporter/promcollector"
	"github.com/slicemeter/slicemeter/exporter/sim"
	"github.com/slicemeter/slicemeter/internal/webserver"
	"github.com/slicemeter/slicemeter/schemas/scenario"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// The target node: 72 instances at 100 ms. The figures are benchmark metrics, not
// assertions (the machine running tests is shared): run
//   go test -run '^$' -bench Node72 -benchtime 2000x ./exporter/
// and read cpu-%-of-core@100ms, ns/instance-sample, nvml-calls/tick, scrape-p99-ms,
// cpu-ms/scrape and wire-bytes/sample. The exporter process's RSS is measured on the binary (see
// the closing note): a benchmark's process holds the test binary's own baggage.

func node72(b *testing.B) (*scenario.Scenario, *sim.Source, *promcollector.Collector, *prometheus.Registry) {
	return benchNode(b, "testdata/node72.yaml", 72)
}

// benchNode simulates the node of a benchmark scenario with want instances.
func benchNode(b *testing.B, path string, want int) (*scenario.Scenario, *sim.Source, *promcollector.Collector, *prometheus.Registry) {
	b.Helper()
	sc, err := scenario.Load(path)
	if err != nil {
		b.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	src, err := sim.New(sc, "", sim.Options{Metrics: nvmlsource.NewMetrics(reg)})
	if err != nil {
		b.Fatal(err)
	}
	if src.Instances() != want {
		b.Fatalf("%d instances, want %d", src.Instances(), want)
	}
	snap := promcollector.New(promcollector.Options{})
	reg.MustRegister(snap)
	return sc, src, snap, reg
}

// BenchmarkNode72Tick is one tick of the whole node: every NVML call of the nvml source
// (simulated NVML underneath), the translation, and the Prometheus snapshot.
func BenchmarkNode72Tick(b *testing.B) { benchTick(b, "testdata/node72.yaml", 72) }

// BenchmarkNode184Tick is the same for the dense node of issue 13: 8 H100 × 7 MIG instances
// plus 8 H100 × 16 vGPUs (184 instances).
func BenchmarkNode184Tick(b *testing.B) { benchTick(b, "testdata/node184.yaml", 184) }

func benchTick(b *testing.B, path string, instances int) {
	sc, src, snap, _ := benchNode(b, path, instances)
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
	b.ReportMetric(perTick/float64(instances), "ns/instance-sample")
	b.ReportMetric(100*perTick/float64(sc.Interval.Nanoseconds()), "cpu-%-of-core@100ms")
	b.ReportMetric(float64(src.NVMLCalls()-calls0)/float64(n-1), "nvml-calls/tick")
}

// BenchmarkNode72Scrape serves /metrics for the 72-instance snapshot: the scrape path reads the
// snapshot only, never NVML. Three scrapes:
//   - plain: the snapshot and the source's metrics, uncompressed text (the figure of earlier runs);
//   - prometheus: what a Prometheus server would get from promhttp's default handler: the
//     registry as cmd/slicemeter builds it (Go and process collectors, promhttp's own metrics,
//     OpenMetrics offered), gzip at its default level, and the request headers Prometheus 3
//     sends (OpenMetrics preferred, gzip);
//   - prometheus-snapshot-handler: the same with webserver.MetricsHandler (gzip at its fastest level)
//     and the snapshot gathered by the registry;
//   - prometheus-snapshot-handler-health: the same with every GPU reporting every health field
//     (exporter.Health), as a Hopper node's NVML does;
//   - direct, prometheus-direct, prometheus-direct-health: the same three scrapes with the snapshot
//     served beside the registry (webserver.MetricsHandler's direct path), which is what
//     cmd/slicemeter serves; direct is curl's scrape: no Accept header, no compression.
//
// scrape-p99-ms is wall time and depends on what else the machine runs; cpu-ms/scrape is the
// process's CPU time (user + system, garbage collection included) per scrape, which does not.
func BenchmarkNode72Scrape(b *testing.B) { benchScrape(b, "testdata/node72.yaml", 72) }

// BenchmarkNode184Scrape is the same for the 184-instance node.
func BenchmarkNode184Scrape(b *testing.B) { benchScrape(b, "testdata/node184.yaml", 184) }

func benchScrape(b *testing.B, path string, instances int) {
	for _, tc := range []struct {
		name       string
		prometheus bool
		handler    func(*prometheus.Registry, *promcollector.Collector) (http.Handler, error)
		health     bool
	}{
		{"plain", false, nil, false},
		{"prometheus", true, func(reg *prometheus.Registry, _ *promcollector.Collector) (http.Handler, error) {
			return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, EnableOpenMetrics: true}), nil
		}, false},
		{"prometheus-snapshot-handler", true, registered, false},
		{"prometheus-snapshot-handler-health", true, registered, true},
		{"direct", false, direct, false},
		{"prometheus-direct", true, direct, false},
		{"prometheus-direct-health", true, direct, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			sc, src, snap, reg := benchNode(b, path, instances)
			ctx := context.Background()
			for n := range 20 {
				t := sc.Start.Add(time.Duration(n) * sc.Interval)
				out, err := src.Read(ctx, t, sc.Interval)
				if err != nil {
					b.Fatal(err)
				}
				if tc.health {
					withAllHealth(out, uint64(n))
				}
				if err := snap.Write(ctx, t, out); err != nil {
					b.Fatal(err)
				}
			}
			h := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
			req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			if tc.handler != nil {
				reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
				var err error
				if h, err = tc.handler(reg, snap); err != nil {
					b.Fatal(err)
				}
			}
			if tc.prometheus {
				req.Header.Set("Accept", prometheusAccept)
				req.Header.Set("Accept-Encoding", "gzip")
			}
			var took []time.Duration
			var size int
			cpu0 := cpuTime(b)
			b.ReportAllocs()
			for b.Loop() {
				began := time.Now()
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				took = append(took, time.Since(began))
				if rec.Code != http.StatusOK {
					b.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
				size = rec.Body.Len()
			}
			b.StopTimer()
			cpu := cpuTime(b) - cpu0
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "scrape-p50-ms")
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "scrape-p99-ms")
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(len(took)), "cpu-ms/scrape")
			b.ReportMetric(float64(size), "body-bytes")
		})
	}
}

// registered serves reg, snap registered in it, through webserver.MetricsHandler.
func registered(reg *prometheus.Registry, _ *promcollector.Collector) (http.Handler, error) {
	return webserver.MetricsHandler(reg, nil)
}

// direct serves snap beside reg (webserver.MetricsHandler's direct path).
func direct(reg *prometheus.Registry, snap *promcollector.Collector) (http.Handler, error) {
	reg.Unregister(snap)
	return webserver.MetricsHandler(reg, snap)
}

// withAllHealth gives every GPU every health field, counters at n.
func withAllHealth(out []exporter.NodeSamples, n uint64) {
	for i := range out {
		for g := range out[i].GPUs {
			out[i].GPUs[g].Health = exporter.Health{
				Supported: exporter.HealthPCIe | exporter.HealthPCIeReplays | exporter.HealthNVLink | exporter.HealthMemTemp |
					exporter.HealthFB | exporter.HealthFBReserved | exporter.HealthCopyUtil | exporter.HealthCodecUtil | exporter.HealthRemap |
					exporter.HealthViolations | exporter.HealthVersions,
				PCIeTxBytes: n << 20, PCIeRxBytes: n << 21, PCIeReplays: n, NVLinkTxBytes: n << 24, NVLinkRxBytes: n << 24,
				MemTempC: 55, FBFree: 1 << 34, FBReserved: 1 << 29, CopyUtil: 0.2, EncoderUtil: 0.05, DecoderUtil: 0.1,
				RemappedCorrectable: 2, PowerViolationNs: n * 1e8, ThermalViolationNs: n * 5e7,
				DriverVersion: "580.65.06", CUDAVersion: "13.0",
			}
		}
	}
}

// prometheusAccept is the Accept header of a Prometheus 3 scrape with the default scrape protocols.
const prometheusAccept = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5," +
	"application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3," +
	"text/plain;version=0.0.4;q=0.2,*/*;q=0.1"

// cpuTime is the CPU time the process has used so far.
func cpuTime(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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
