package promcollector

import (
	"bytes"
	"context"
	"flag"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slicemeter/slicemeter/exporter"
	"github.com/slicemeter/slicemeter/exporter/sim"
	"github.com/slicemeter/slicemeter/schemas/scenario"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

var update = flag.Bool("update", false, "rewrite testdata/node.prom and testdata/node-health.prom")

// The exposition of a fixed simulated node after a fixed number of ticks, byte for byte (as
// node_exporter's end-to-end output): a change to any name, help text, label or value shows
// here. Only the collector is registered: the Go and process collectors vary by machine.
// node-health.prom is the same node with every GPU reporting every health field and every MIG
// instance its GPU instance id.
func TestGoldenExposition(t *testing.T) {
	t.Run("sim", func(t *testing.T) { goldenExposition(t, "testdata/node.prom", false) })
	t.Run("health", func(t *testing.T) { goldenExposition(t, "testdata/node-health.prom", true) })
}

// withHealth is a source whose GPUs report every health field (allHealth) and whose MIG
// instances have GPU instance ids.
type withHealth struct{ exporter.Source }

func (s withHealth) Read(ctx context.Context, t time.Time, interval time.Duration) ([]exporter.NodeSamples, error) {
	out, err := s.Source.Read(ctx, t, interval)
	for i := range out {
		mig := map[string]bool{}
		for _, smp := range out[i].Samples {
			mig[smp.InstanceId] = smp.Kind == pb.Kind_KIND_MIG
		}
		for g := range out[i].GPUs {
			st := &out[i].GPUs[g]
			st.Health = allHealth()
			for a := range st.Instances {
				if in := &st.Instances[a]; mig[in.InstanceID] {
					in.GPUInstanceID, in.HasGPUInstanceID = uint32(a+1), true
				}
			}
		}
	}
	return out, err
}

// goldenRun is the golden node's snapshot after its ticks, registered alone.
func goldenRun(t *testing.T, health bool) (*Collector, *prometheus.Registry) {
	t.Helper()
	const ticks = 15
	sc, err := scenario.Load("testdata/node.yaml")
	if err != nil {
		t.Fatal(err)
	}
	src, err := sim.New(sc, "", sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	col := New(Options{})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)
	var read exporter.Source = src
	if health {
		read = withHealth{src}
	}
	loop := &exporter.Loop{Source: read, Clock: exporter.FastClock{}, Sinks: []exporter.Sink{col},
		Start: sc.Start, End: sc.Start.Add(ticks * sc.Interval), Interval: sc.Interval}
	if n, err := loop.Run(context.Background()); err != nil || n != ticks*int64(src.Instances()) {
		t.Fatalf("%d samples (%v), want %d", n, err, ticks*src.Instances())
	}
	return col, reg
}

func goldenExposition(t *testing.T, golden string, health bool) {
	_, reg := goldenRun(t, health)
	got := exposition(t, reg)
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./exporter/promcollector -run Golden -update)", err)
	}
	if got != string(want) {
		t.Errorf("the exposition differs from %s (if the change is meant, rerun with -update):\n%s", golden, lineDiff(string(want), got))
	}
}

// lineDiff lists the lines only one side has.
func lineDiff(want, got string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range bytes.Split([]byte(s), []byte("\n")) {
			m[string(l)] = true
		}
		return m
	}
	w, g := in(want), in(got)
	var b bytes.Buffer
	for _, l := range bytes.Split([]byte(want), []byte("\n")) {
		if !g[string(l)] {
			b.WriteString("- " + string(l) + "\n")
		}
	}
	for _, l := range bytes.Split([]byte(got), []byte("\n")) {
		if !w[string(l)] {
			b.WriteString("+ " + string(l) + "\n")
		}
	}
	return b.String()
}
