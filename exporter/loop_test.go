package exporter

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// countingSource returns one sample per tick and fails on the ticks listed in fail.
type countingSource struct {
	ticks []time.Time
	fail  map[int]bool
}

func (s *countingSource) Read(_ context.Context, t time.Time, interval time.Duration) ([]NodeSamples, error) {
	n := len(s.ticks)
	s.ticks = append(s.ticks, t)
	if s.fail[n] {
		return nil, errors.New("nvml: GPU is lost")
	}
	return []NodeSamples{{Node: "n", Samples: []*pb.Sample{{TsNs: uint64(t.UnixNano()), IntervalNs: uint64(interval), Kind: pb.Kind_KIND_GPU, InstanceId: "gpu0"}}}}, nil
}

// badValueSource returns, every tick, a valid sample, one with sm_active NaN and one with
// memory used above total.
type badValueSource struct{}

func (badValueSource) Read(_ context.Context, t time.Time, interval time.Duration) ([]NodeSamples, error) {
	sample := func(id string) *pb.Sample {
		return &pb.Sample{TsNs: uint64(t.UnixNano()), IntervalNs: uint64(interval), Kind: pb.Kind_KIND_GPU, InstanceId: id, SmActive: 0.5}
	}
	nan, mem := sample("gpu1"), sample("gpu2")
	nan.SmActive = math.NaN()
	mem.MemUsedBytes, mem.MemTotalBytes = 2, 1
	return []NodeSamples{{Node: "n", Samples: []*pb.Sample{sample("gpu0"), nan, mem}}}, nil
}

func TestLoopDropsAndCountsInvalidSamples(t *testing.T) {
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	sink := &recordingSink{}
	reg := prometheus.NewRegistry()
	l := &Loop{Source: badValueSource{}, Clock: FastClock{}, Sinks: []Sink{sink}, Start: start, End: start.Add(time.Second),
		Interval: 100 * time.Millisecond, Metrics: NewLoopMetrics(reg)}
	if _, err := l.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sink.samples != 10 {
		t.Errorf("sink got %d samples, want the 10 valid ones", sink.samples)
	}
	for field, want := range map[string]float64{"sm_active": 10, "mem_used_bytes": 10} {
		if got := testutil.ToFloat64(l.Metrics.Refused.WithLabelValues("invalid", field)); got != want {
			t.Errorf("refused{field=%s} = %v, want %v", field, got, want)
		}
	}
}

type recordingSink struct {
	writes, flushes int
	samplesAtFlush  []int
	samples         int
}

func (r *recordingSink) Write(_ context.Context, _ time.Time, s []NodeSamples) error {
	r.writes++
	for _, ns := range s {
		r.samples += len(ns.Samples)
	}
	return nil
}

func (r *recordingSink) Flush(context.Context) error {
	r.flushes++
	r.samplesAtFlush = append(r.samplesAtFlush, r.samples)
	return nil
}

func TestLoopTicksAndFlushes(t *testing.T) {
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name        string
		window      time.Duration
		interval    time.Duration
		flush       time.Duration
		fail        map[int]bool
		wantTicks   int
		wantSamples int64
		wantFlushes []int
	}{
		{"whole window", time.Second, 100 * time.Millisecond, 500 * time.Millisecond, nil, 10, 10, []int{5, 10, 10}},
		{"flush below interval flushes every tick", 300 * time.Millisecond, 100 * time.Millisecond, 0, nil, 3, 3, []int{1, 2, 3, 3}},
		{"failed reads are skipped, not fatal", time.Second, 100 * time.Millisecond, time.Second, map[int]bool{2: true, 3: true}, 10, 8, []int{8, 8}},
		{"window not a multiple of the interval", 250 * time.Millisecond, 100 * time.Millisecond, time.Second, nil, 3, 3, []int{3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := &countingSource{fail: tt.fail}
			sink := &recordingSink{}
			l := &Loop{Source: src, Clock: FastClock{}, Sinks: []Sink{sink}, Start: start, End: start.Add(tt.window), Interval: tt.interval, FlushEvery: tt.flush}
			n, err := l.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if n != tt.wantSamples || len(src.ticks) != tt.wantTicks {
				t.Errorf("samples %d ticks %d, want %d and %d", n, len(src.ticks), tt.wantSamples, tt.wantTicks)
			}
			for i, tick := range src.ticks {
				if want := start.Add(time.Duration(i) * tt.interval); !tick.Equal(want) {
					t.Errorf("tick %d at %v, want %v", i, tick, want)
				}
			}
			if len(sink.samplesAtFlush) != len(tt.wantFlushes) {
				t.Fatalf("flushes after %v samples, want %v", sink.samplesAtFlush, tt.wantFlushes)
			}
			for i := range tt.wantFlushes {
				if sink.samplesAtFlush[i] != tt.wantFlushes[i] {
					t.Errorf("flushes after %v samples, want %v", sink.samplesAtFlush, tt.wantFlushes)
				}
			}
		})
	}
}

func TestLoopStopsOnCancelAndFlushes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	src := &countingSource{}
	sink := &recordingSink{}
	start := time.Now()
	l := &Loop{Source: src, Clock: RealClock{}, Sinks: []Sink{sink}, Start: start, Interval: 10 * time.Millisecond, FlushEvery: time.Hour}
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := l.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if sink.samples == 0 || sink.flushes != 1 || sink.samplesAtFlush[0] != sink.samples {
		t.Errorf("want one final flush of everything sampled, got %v of %d", sink.samplesAtFlush, sink.samples)
	}
}

func TestRealClockOffset(t *testing.T) {
	// A scenario tick one hour in the past is due now when the offset is one hour.
	c := RealClock{Offset: time.Hour}
	tick := time.Now().Add(-time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := c.WaitUntil(ctx, tick); err != nil {
		t.Fatal(err)
	}
	if late := c.Late(tick); late < 0 || late > time.Second {
		t.Errorf("Late = %v", late)
	}
	if err := c.WaitUntil(ctx, time.Now().Add(time.Hour)); err == nil {
		t.Error("waiting for a tick two hours away returned before the context ended")
	}
}

// TestLoopLogsRepeatedFailuresOnce: a source that fails at every tick (a GPU fallen off the
// bus, at 10 Hz) is one line, and one more at the end saying how many were not logged; not
// a line per tick.
func TestLoopLogsRepeatedFailuresOnce(t *testing.T) {
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	fail := map[int]bool{}
	for i := range 600 {
		fail[i] = true
	}
	var buf bytes.Buffer
	l := &Loop{Source: &countingSource{fail: fail}, Clock: FastClock{}, Sinks: []Sink{&recordingSink{}}, Start: start, End: start.Add(time.Minute),
		Interval: 100 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&buf, nil))}
	if _, err := l.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if n := strings.Count(out, "reading the source failed"); n != 2 || !strings.Contains(out, "not_logged_since_last=599") {
		t.Errorf("%d lines for 600 failed ticks, want 2 (the first, then the count of the rest):\n%s", n, out)
	}
}
