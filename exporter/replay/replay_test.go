package replay

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/slicemeter/slicemeter/exporter"
	"github.com/slicemeter/slicemeter/exporter/capture"
	"github.com/slicemeter/slicemeter/exporter/sim"
	"github.com/slicemeter/slicemeter/schemas/scenario"
)

// The committed capture belongs to package capture (its format); the e2e tests replay it too.
const (
	committedCapture = "../capture/testdata/node.capture"
	captureScenario  = "../capture/testdata/node.yaml"
)

var update = flag.Bool("update", false, "rewrite ../capture/testdata/node.capture from ../capture/testdata/node.yaml")

// simulate reads every tick of the test scenario, recording into path if it is not empty.
func simulate(t *testing.T, path string) []exporter.NodeSamples {
	t.Helper()
	sc, err := scenario.Load(captureScenario)
	if err != nil {
		t.Fatal(err)
	}
	opts := sim.Options{}
	var rec *capture.Recorder
	if path != "" {
		w, err := capture.Create(path, capture.Header{Node: "node-c", IntervalNs: int64(sc.Interval), Source: "sim", RediscoverNs: int64(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		rec = capture.NewRecorder(w, sc.Interval)
		opts.Recorder, opts.Rediscover = rec, time.Hour
	}
	src, err := sim.New(sc, "", opts)
	if err != nil {
		t.Fatal(err)
	}
	var out []exporter.NodeSamples
	for d := time.Duration(0); d < sc.Duration; d += sc.Interval {
		ns, err := src.Read(context.Background(), sc.Start.Add(d), sc.Interval)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ns...)
	}
	if rec != nil {
		if err := rec.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func replay(t *testing.T, path string) ([]exporter.NodeSamples, *Source) {
	t.Helper()
	p, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Open(nil, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	var out []exporter.NodeSamples
	for k := 0; k < p.Ticks(); k++ {
		ns, err := p.Read(context.Background(), p.Start().Add(time.Duration(k)*p.Interval()), p.Interval())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ns...)
	}
	return out, p
}

func sameSamples(t *testing.T, got, want []exporter.NodeSamples) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d ticks, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Node != want[i].Node || len(got[i].Samples) != len(want[i].Samples) {
			t.Fatalf("tick %d: node %s with %d samples, want %s with %d", i, got[i].Node, len(got[i].Samples), want[i].Node, len(want[i].Samples))
		}
		for j := range want[i].Samples {
			if !proto.Equal(got[i].Samples[j], want[i].Samples[j]) {
				t.Fatalf("tick %d sample %d:\n got %v\nwant %v", i, j, got[i].Samples[j], want[i].Samples[j])
			}
		}
		// The GPU health read at the tick replays too (it is not in the samples), and so does
		// the PCI address read at discovery.
		for j := range want[i].GPUs {
			if j >= len(got[i].GPUs) || got[i].GPUs[j].Health != want[i].GPUs[j].Health || want[i].GPUs[j].Health.Supported == 0 {
				t.Fatalf("tick %d GPU %d health:\n got %+v\nwant %+v (and some supported)", i, j, got[i].GPUs[j].Health, want[i].GPUs[j].Health)
			}
			if g, w := got[i].GPUs[j].PCIBusID, want[i].GPUs[j].PCIBusID; g != w || w == "" {
				t.Fatalf("tick %d GPU %d: pci bus id %q, want %q (not empty)", i, j, g, w)
			}
		}
	}
}

func TestRecordAndReplayGiveTheSameSamples(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.capture")
	want := simulate(t, path)
	got, p := replay(t, path)
	sameSamples(t, got, want)
	if p.Misses != 0 {
		t.Errorf("%d calls without a recorded answer", p.Misses)
	}
	if n := len(want[len(want)-1].Samples); n != 6 {
		t.Fatalf("%d instances, want 6", n)
	}
}

// The committed capture still replays to what the simulator produces: the format and the
// translation code have not drifted from it.
func TestReplayCommittedCapture(t *testing.T) {
	path := committedCapture
	if *update {
		simulate(t, path)
	}
	got, p := replay(t, path)
	sameSamples(t, got, simulate(t, ""))
	if p.Misses != 0 {
		t.Errorf("%d calls without a recorded answer", p.Misses)
	}
	if !p.Start().Equal(time.Date(2026, 1, 5, 0, 0, 0, 100e6, time.UTC)) || p.Ticks() != 30 {
		t.Errorf("start %v, %d ticks", p.Start(), p.Ticks())
	}
}

func FuzzLoad(f *testing.F) {
	good, err := os.ReadFile(committedCapture)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good[:min(len(good), 4096)])
	f.Add([]byte(capture.Magic))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "c")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		p, err := Load(path)
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		// A capture that loads must replay without panicking.
		if p.Open(nil, slog.New(slog.DiscardHandler)) == nil {
			for k := 0; k < p.Ticks(); k++ {
				_, _ = p.Read(context.Background(), p.Start().Add(time.Duration(k)*p.Interval()), p.Interval())
			}
		}
	})
}
