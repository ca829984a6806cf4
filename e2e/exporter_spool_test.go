package e2e

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/e2e/apptest"
	"github.com/slicemeter/slicemeter/exporter/sim"
	"github.com/slicemeter/slicemeter/schemas/scenario"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// spoolScenario is one node sampled in real time for 70 s: MIG instances and a whole GPU.
const spoolScenario = `version: 1
name: spool-outage
start: "2026-01-05T00:00:00Z"
duration: 70s
interval: 100ms
currency: USD
prices: {A100-SXM4-40GB: 1.60, H100-SXM5-80GB: 2.40}
tiers: {pro: 1.0}
sla: {cold_start: {pro: 30s}}
nodes:
  - name: node-k
    gpus:
      - {model: A100-SXM4-40GB, mig: ["3g.20gb", "3g.20gb"]}
      - {model: H100-SXM5-80GB}
tenants:
  - name: a
    tier: pro
    allocations:
      - {target: node-k/gpu0/mig0, requested: 0s, ready: 2s, end: 70s, workload: {steps: [[0s, 0.3], [30s, 0.8]], mem: 0.4}}
      - {target: node-k/gpu1, requested: 0s, ready: 5s, end: 60s, workload: {sm: 0.6, mem: 0.5}}
`

// The real broker is stopped while the exporter samples in real time, until ten batches wait
// in the disk spool: every sample arrives once Kafka is back, exactly as produced, in order.
func TestExporterSpoolsThroughKafkaOutage(t *testing.T) {
	t.Parallel()
	// A broker of its own: the test stops it.
	kfk := localtest.NewKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	file := writeFile(t, "spool.yaml", spoolScenario)
	sc := loadScenario(t, file)
	want := simulated(t, sc)

	exp := apptest.StartExporter(t, ctx, "--source", "sim", "--scenario", file,
		"--kafka.brokers", kfk.Brokers(), "--kafka.flush-interval", "1s", "--kafka.partitions", "2",
		"--spool.dir", filepath.Join(dir, "spool"))
	exporterLog := exp.Log

	// A few batches go through before the outage, ten wait in the spool during it.
	exp.WaitMetric(t, time.Minute, "slicemeter_exporter_batches_published_total", 3)
	if err := kfk.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Log("Kafka stopped")
	exp.WaitMetric(t, time.Minute, "slicemeter_exporter_spool_batches", 10)
	if err := kfk.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Log("Kafka restarted")
	if err := exp.Wait(ctx); err != nil {
		t.Fatalf("exporter: %v\n%s", err, exporterLog())
	}

	if !strings.Contains(exporterLog(), "samples stay in the spool") {
		t.Errorf("the exporter never reported spooling while Kafka was down\n%s", exporterLog())
	}
	got, batches := consume(t, ctx, kfk.Brokers(), len(want))
	missing, altered, dup := 0, 0, 0
	seen := map[string]bool{}
	for _, s := range got {
		k := fmt.Sprintf("%s@%d", s.InstanceId, s.TsNs)
		if seen[k] {
			dup++
			continue
		}
		seen[k] = true
		if w, ok := want[k]; !ok || !proto.Equal(w, s) {
			altered++
			if altered < 3 {
				t.Errorf("sample %s arrived as %v, produced as %v", k, s, w)
			}
		}
	}
	for k := range want {
		if !seen[k] {
			missing++
		}
	}
	if missing != 0 || altered != 0 {
		t.Fatalf("%d of %d samples missing, %d altered (%d duplicates)\n%s", missing, len(want), altered, dup, exporterLog())
	}
	if dup != 0 {
		// At-least-once: a write whose acknowledgement was lost with the broker is sent again;
		// the collector's inserts are idempotent.
		t.Logf("%d samples arrived twice", dup)
	}
	// In order: a node's batches keep their sequence within the partition (key = node).
	for i := 1; i < len(batches); i++ {
		if batches[i].ExporterId == batches[i-1].ExporterId && batches[i].Seq < batches[i-1].Seq {
			t.Fatalf("batch seq %d after %d: the spool drained out of order", batches[i].Seq, batches[i-1].Seq)
		}
	}
	t.Logf("%d samples in %d batches, all as produced", len(seen), len(batches))
}

// simulated is what the simulator produces for the scenario, by instance and time.
func simulated(t *testing.T, sc *scenario.Scenario) map[string]*pb.Sample {
	t.Helper()
	src, err := sim.New(sc, "", sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*pb.Sample{}
	for d := time.Duration(0); d < sc.Duration; d += sc.Interval {
		ns, err := src.Read(context.Background(), sc.Start.Add(d), sc.Interval)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range ns {
			for _, s := range n.Samples {
				// The exporter's real clock maps the scenario onto wall time; the samples keep the
				// scenario's own timestamps.
				out[fmt.Sprintf("%s@%d", s.InstanceId, s.TsNs)] = s
			}
		}
	}
	return out
}

// consume reads the samples topic from the start until want samples arrived (or a minute
// passed), partition by partition.
func consume(t *testing.T, ctx context.Context, brokers string, want int) ([]*pb.Sample, []*pb.SampleBatch) {
	t.Helper()
	conn, err := kafka.DialContext(ctx, "tcp", brokers)
	if err != nil {
		t.Fatal(err)
	}
	parts, err := conn.ReadPartitions(pb.TopicSamples)
	conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	var samples []*pb.Sample
	var batches []*pb.SampleBatch
	deadline := time.Now().Add(time.Minute)
	for _, p := range parts {
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{brokers}, Topic: pb.TopicSamples, Partition: p.ID, MinBytes: 1, MaxBytes: 16 << 20})
		for len(samples) < want && time.Now().Before(deadline) {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			m, err := r.ReadMessage(rctx)
			cancel()
			if errors.Is(err, context.DeadlineExceeded) {
				break // this partition is exhausted
			}
			if err != nil {
				t.Fatal(err)
			}
			var b pb.SampleBatch
			if err := proto.Unmarshal(m.Value, &b); err != nil {
				t.Fatalf("partition %d offset %d: %v", p.ID, m.Offset, err)
			}
			batches = append(batches, &b)
			samples = append(samples, b.Samples...)
		}
		r.Close()
	}
	return samples, batches
}
