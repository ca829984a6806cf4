package service

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slicemeter/slicemeter/exporter"
	"github.com/slicemeter/slicemeter/internal/usage"
	"github.com/slicemeter/slicemeter/schemas/validate"
)

const loopScenario = "testdata/loop.yaml" // 500 ms at 100 ms, loop: true

// stopAfter passes ticks through and ends the run after n of them, noting what the first
// instance's sample said (the source may reuse its samples).
type stopAfter struct {
	exporter.Source
	n        int
	stop     context.CancelFunc
	ts       []time.Time
	attached []bool
}

func (s *stopAfter) Read(ctx context.Context, t time.Time, interval time.Duration) ([]exporter.NodeSamples, error) {
	out, err := s.Source.Read(ctx, t, interval)
	for _, ns := range out {
		s.ts = append(s.ts, time.Unix(0, int64(ns.Samples[0].TsNs)))
		s.attached = append(s.attached, ns.Samples[0].Attached)
	}
	if len(s.ts) >= s.n {
		s.stop()
	}
	return out, err
}

// --sim.start now stamps samples with the wall clock, and a looping scenario runs past its
// duration until stopped.
func TestSimStartNowAndLoop(t *testing.T) {
	began := time.Now()
	svc, err := New(Config{Source: "sim", ScenarioPath: loopScenario, SimStart: "now", FlushInterval: time.Second},
		prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	if !svc.src.end.IsZero() {
		t.Errorf("a looping scenario ends at %v; want no end", svc.src.end)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const ticks = 12 // more than two repetitions of 5 ticks
	wrap := &stopAfter{Source: svc.src.Source, n: ticks, stop: cancel}
	svc.src.Source = wrap
	n, err := svc.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n < ticks {
		t.Fatalf("%d samples, want at least %d: the loop stopped at the scenario's duration", n, ticks)
	}
	for _, ts := range wrap.ts {
		if ts.Before(began.Add(-validate.MaxAhead)) || ts.After(time.Now().Add(validate.MaxAhead)) {
			t.Fatalf("sample stamped %v, not near the wall clock %v", ts, began)
		}
	}
	attached := 0
	for _, a := range wrap.attached[5:10] { // the second repetition: attached in [200ms, 400ms)
		if a {
			attached++
		}
	}
	if attached != 2 {
		t.Errorf("%d attached ticks in the second repetition, want 2", attached)
	}
}

func TestSimStartErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want []string
	}{
		{"bad time", Config{Source: "sim", ScenarioPath: nodeScenario, SimStart: "tomorrow"}, []string{`--sim.start "tomorrow"`, "RFC 3339"}},
		{"fast ahead of now", Config{Source: "sim", ScenarioPath: nodeScenario, SimStart: time.Now().Add(time.Hour).Format(time.RFC3339), Fast: true},
			[]string{"--sim.fast", "ahead are refused"}},
		{"fast loop", Config{Source: "sim", ScenarioPath: loopScenario, Fast: true}, []string{"--sim.fast", "loop: true"}},
		// UnixNano of 2610 wraps to 2026: samples the collector would take for real ones.
		{"start in 2610", Config{Source: "sim", ScenarioPath: nodeScenario, SimStart: "2610-08-01T00:00:00Z"},
			[]string{`--sim.start "2610-08-01T00:00:00Z"`, "2106-02-07T06:28:15Z"}},
		{"start in 1999", Config{Source: "sim", ScenarioPath: nodeScenario, SimStart: "1999-12-31T00:00:00Z"},
			[]string{`--sim.start "1999-12-31T00:00:00Z"`, "2000-01-01T00:00:00Z"}},
		{"ends after 2106", Config{Source: "sim", ScenarioPath: nodeScenario, SimStart: "2106-02-07T06:28:15Z"},
			[]string{`--sim.start "2106-02-07T06:28:15Z"`, "would run to 2106-02-07T"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
			if !usage.Is(err) {
				t.Fatalf("err %v, want a usage error", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not name %q", err, w)
				}
			}
		})
	}
}
