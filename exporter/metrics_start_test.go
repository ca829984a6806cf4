package exporter

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
	"github.com/slicemeter/slicemeter/schemas/validate"
)

// Every refusal the validator gives a sample is in Refusals (so its series exists at start).
func TestRefusalsListsTheValidatorsRefusals(t *testing.T) {
	now := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	good := func() *pb.Sample {
		return &pb.Sample{InstanceId: "gpu0", Kind: pb.Kind_KIND_GPU, TsNs: uint64(now.UnixNano()), IntervalNs: 1e8,
			SmActive: 0.5, PowerWatts: 100, MemUsedBytes: 1, MemTotalBytes: 2}
	}
	bad := []func(*pb.Sample){
		func(s *pb.Sample) { s.InstanceId = "" },
		func(s *pb.Sample) { s.Kind = 9 },
		func(s *pb.Sample) { s.TsNs = 0 },
		func(s *pb.Sample) { s.TsNs = math.MaxUint64 },
		func(s *pb.Sample) { s.TsNs = 1 },
		func(s *pb.Sample) { s.TsNs = uint64(now.Add(time.Hour).UnixNano()) },
		func(s *pb.Sample) { s.IntervalNs = 0 },
		func(s *pb.Sample) { s.IntervalNs = uint64(time.Hour) },
		func(s *pb.Sample) { s.SmActive = math.NaN() },
		func(s *pb.Sample) { s.PowerWatts = math.Inf(1) },
		func(s *pb.Sample) { s.MemUsedBytes = 3 },
		func(s *pb.Sample) { s.Vgpu = &pb.VgpuSchedule{SwitchNs: s.IntervalNs + 1} },
	}
	listed := Refusals()
	seen := map[[2]string]bool{}
	for i, f := range bad {
		s := good()
		f(s)
		r := validate.ProtoSample(s, now)
		if r == nil {
			t.Errorf("case %d: not refused", i)
			continue
		}
		seen[[2]string{r.Reason, r.Field}] = true
		if !slices.Contains(listed, [2]string{r.Reason, r.Field}) {
			t.Errorf("refusal (%s, %s) is not in Refusals()", r.Reason, r.Field)
		}
	}
	for _, r := range listed {
		if !seen[r] {
			t.Errorf("Refusals() lists %v, which no case produced", r)
		}
	}
}

// The loop's counters exist before the first tick: every refusal and every sink's errors at 0.
func TestLoopMetricsExistFromTheStart(t *testing.T) {
	m := NewLoopMetrics(nil)
	if got, want := testutil.CollectAndCount(m.Refused), len(Refusals()); got != want {
		t.Errorf("%d samples_refused_total series at start, want %d", got, want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // no tick at all
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	l := &Loop{Source: &countingSource{}, Clock: FastClock{}, Sinks: []Sink{&recordingSink{}}, Start: start, Interval: time.Second, Metrics: m}
	if _, err := l.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if got := testutil.CollectAndCount(m.SinkErrors); got != 1 {
		t.Errorf("%d sink_errors_total series, want 1 (the sink's, at 0)", got)
	}
	if v := testutil.ToFloat64(m.SinkErrors.WithLabelValues("*exporter.recordingSink")); v != 0 {
		t.Errorf("sink_errors_total = %v, want 0", v)
	}
}
