package promcollector

import (
	"bytes"
	"context"
	"flag"
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slicemeter/slicemeter/exporter"
	"github.com/slicemeter/slicemeter/exporter/sim"
	"github.com/slicemeter/slicemeter/schemas/scenario"
)

var update = flag.Bool("update", false, "rewrite testdata/node.prom")

// The exposition of a fixed simulated node after a fixed number of ticks, byte for byte (as
// node_exporter's end-to-end output): a change to any name, help text, label or value shows
// here. Only the collector is registered: the Go and process collectors vary by machine.
func TestGoldenExposition(t *testing.T) {
	const ticks = 15
	sc, err := scenario.Load("testdata/node.yaml")
	if err != nil {
		t.Fatal(err)
	}
	src, err := sim.New(sc, "")
	if err != nil {
		t.Fatal(err)
	}
	col := New()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)
	loop := &exporter.Loop{Source: src, Clock: exporter.FastClock{}, Sinks: []exporter.Sink{col},
		Start: sc.Start, End: sc.Start.Add(ticks * sc.Interval), Interval: sc.Interval}
	if n, err := loop.Run(context.Background()); err != nil || n != ticks*int64(src.Instances()) {
		t.Fatalf("%d samples (%v), want %d", n, err, ticks*src.Instances())
	}
	got := exposition(t, reg)
	const golden = "testdata/node.prom"
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
