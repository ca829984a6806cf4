package exporter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slicemeter/slicemeter/internal/lograte"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
	"github.com/slicemeter/slicemeter/schemas/validate"
)

// Loop samples a Source at start + n·Interval (n = 0, 1, …) until End (if set) or ctx ends.
type Loop struct {
	Source   Source
	Clock    Clock
	Sinks    []Sink
	Start    time.Time
	End      time.Time     // zero: run until ctx is done
	Interval time.Duration // sampling interval
	// FlushEvery is the flush interval in tick time (at least one tick).
	FlushEvery time.Duration
	Logger     *slog.Logger
	Metrics    *LoopMetrics
}

// LoopMetrics are the sampling loop's self-metrics.
type LoopMetrics struct {
	Ticks        prometheus.Counter
	Samples      prometheus.Counter
	SourceErrors prometheus.Counter
	SinkErrors   *prometheus.CounterVec
	Jitter       prometheus.Histogram
	// Refused counts samples the validator refused (by reason and field): they are dropped,
	// never published, so that one bad reading cannot reach the bill.
	Refused *prometheus.CounterVec
}

// NewLoopMetrics registers the loop's metrics.
func NewLoopMetrics(reg prometheus.Registerer) *LoopMetrics {
	m := &LoopMetrics{
		Ticks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slicemeter_exporter_ticks_total", Help: "Sampling ticks taken.",
		}),
		Samples: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slicemeter_exporter_samples_total", Help: "Instance samples taken.",
		}),
		SourceErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slicemeter_exporter_source_errors_total", Help: "Ticks whose source read failed; their samples are missing.",
		}),
		SinkErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slicemeter_exporter_sink_errors_total", Help: "Failed writes or flushes of a sink.",
		}, []string{"sink"}),
		Jitter: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "slicemeter_exporter_sampling_jitter_seconds",
			Help:    "How late a tick was taken: actual minus intended time.",
			Buckets: []float64{.0001, .0005, .001, .002, .005, .01, .025, .05, .1, .25, 1},
		}),
		Refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slicemeter_exporter_samples_refused_total", Help: "Samples the validator refused (NaN, a ratio outside [0, 1], ...), by reason and field; they are dropped, not published.",
		}, []string{"reason", "field"}),
	}
	// The refusals the validator can give exist from the start at 0, so that increase() sees
	// the first one.
	for _, r := range Refusals() {
		m.Refused.WithLabelValues(r[0], r[1])
	}
	if reg != nil {
		reg.MustRegister(m.Ticks, m.Samples, m.SourceErrors, m.SinkErrors, m.Jitter, m.Refused)
	}
	return m
}

// Refusals are the (reason, field) pairs validate.ProtoSample can refuse a sample with;
// TestRefusalsListsTheValidatorsRefusals keeps the list complete.
func Refusals() [][2]string {
	return [][2]string{
		{validate.ReasonMissingInstanceID, "instance_id"},
		{validate.ReasonUnknownKind, "kind"},
		{validate.ReasonMissingTimestamp, "ts_ns"},
		{validate.ReasonTimestampOutOfRange, "ts_ns"},
		{validate.ReasonMissingInterval, "interval_ns"},
		{validate.ReasonInvalid, "ts_ns"},
		{validate.ReasonInvalid, "interval_ns"},
		{validate.ReasonInvalid, "sm_active"},
		{validate.ReasonInvalid, "power_watts"},
		{validate.ReasonInvalid, "mem_used_bytes"},
		{validate.ReasonInvalid, "vgpu.switch_ns"},
	}
}

func sinkName(s Sink) string { return fmt.Sprintf("%T", s) }

// Run samples until End or ctx is done, then flushes the sinks. It returns the samples taken.
func (l *Loop) Run(ctx context.Context) (int64, error) {
	if l.Interval <= 0 {
		return 0, errors.New("sampling interval must be > 0")
	}
	if l.Metrics == nil {
		l.Metrics = NewLoopMetrics(nil)
	}
	logger := l.Logger
	if logger == nil {
		logger = slog.Default()
	}
	// A source that keeps returning a bad value, or failing, or a sink that keeps failing, would
	// log it every tick: once a minute per reason, with how many were not logged.
	refusals := lograte.New(logger, time.Minute)
	for _, s := range l.Sinks { // each sink's error series from the start, at 0
		l.Metrics.SinkErrors.WithLabelValues(sinkName(s))
	}
	flushTicks := int64(max(1, l.FlushEvery/l.Interval))
	var taken int64
	for n := int64(0); ; n++ {
		t := l.Start.Add(time.Duration(n) * l.Interval)
		if !l.End.IsZero() && !t.Before(l.End) {
			break
		}
		// What the source must read between ticks (the vGPU scheduler log), on the same clock.
		if _, err := PollBefore(ctx, l.Source, l.Clock, t, l.Interval); err != nil {
			if ctx.Err() != nil {
				break
			}
			refusals.Log(ctx, time.Now(), slog.LevelWarn, "source_poll", "a read of the source between ticks failed", "tick", t, "err", err)
		}
		if err := l.Clock.WaitUntil(ctx, t); err != nil {
			break
		}
		l.Metrics.Jitter.Observe(max(0, l.Clock.Late(t)).Seconds())
		samples, err := l.Source.Read(ctx, t, l.Interval)
		l.Metrics.Ticks.Inc()
		if err != nil {
			l.Metrics.SourceErrors.Inc()
			refusals.Log(ctx, time.Now(), slog.LevelWarn, "source_read", "reading the source failed; this tick is missing", "tick", t, "err", err)
			continue
		}
		for i := range samples {
			taken += int64(len(samples[i].Samples))
			l.Metrics.Samples.Add(float64(len(samples[i].Samples)))
			samples[i].Samples = l.valid(ctx, samples[i].Node, samples[i].Samples, t, refusals)
		}
		for _, s := range l.Sinks {
			if err := s.Write(ctx, t, samples); err != nil {
				l.Metrics.SinkErrors.WithLabelValues(sinkName(s)).Inc()
				if ctx.Err() != nil {
					break
				}
				refusals.Log(ctx, time.Now(), slog.LevelWarn, "write "+sinkName(s), "writing samples failed", "sink", sinkName(s), "err", err)
			}
		}
		if (n+1)%flushTicks == 0 {
			l.flush(ctx, refusals)
		}
	}
	// A final flush even after cancellation: what was sampled should still be delivered.
	flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	l.flush(flushCtx, refusals)
	// What was held back in the last minute is said before the exit.
	refusals.Flush(flushCtx, time.Now().Add(time.Minute))
	if ctx.Err() != nil && !errors.Is(ctx.Err(), context.Canceled) {
		return taken, ctx.Err()
	}
	return taken, nil
}

// valid is samples without those the validator refuses, counted in Metrics.Refused. The
// validating clock is tick time t, the source's wall clock. A new slice is made only when one
// is refused: the source may own the one it returned.
func (l *Loop) valid(ctx context.Context, node string, samples []*pb.Sample, t time.Time, refusals *lograte.Limiter) []*pb.Sample {
	var kept []*pb.Sample
	for i, s := range samples {
		r := validate.ProtoSample(s, t)
		if r == nil {
			if kept != nil {
				kept = append(kept, s)
			}
			continue
		}
		if kept == nil {
			kept = append(make([]*pb.Sample, 0, len(samples)-1), samples[:i]...)
		}
		l.Metrics.Refused.WithLabelValues(r.Reason, r.Field).Inc()
		refusals.Log(ctx, time.Now(), slog.LevelWarn, r.Reason+" "+r.Field, "sample refused, not published",
			"node", node, "instance_id", s.GetInstanceId(), "tick", t, "err", r)
	}
	if kept == nil {
		return samples
	}
	return kept
}

func (l *Loop) flush(ctx context.Context, limit *lograte.Limiter) {
	for _, s := range l.Sinks {
		if err := s.Flush(ctx); err != nil {
			l.Metrics.SinkErrors.WithLabelValues(sinkName(s)).Inc()
			limit.Log(ctx, time.Now(), slog.LevelWarn, "flush "+sinkName(s), "flushing samples failed", "sink", sinkName(s), "err", err)
		}
	}
}
