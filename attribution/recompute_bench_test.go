package attribution_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/service"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/attribution/stored"
)

// BenchmarkResumeRecomputation: the time a restarted attribution service takes to finish a
// recomputation that a restart interrupted, over the benchmark fleet (bench_test.go; its
// stored minutes, SLICEMETER_BENCH_STORED, are the minutes to attribute again). Every
// allocation is received after the last stored pass, so the first runner records a
// recomputation of the whole fleet's time and does one pass of 120 minutes (a quarter of
// the time at most); it is dropped (a
// restart) and a new runner finishes, pass after pass, from where the record says. Logged:
// the minutes left after the restart, the passes and the time to finish.
//
//	SLICEMETER_BENCH_INSTANCES=1000 SLICEMETER_BENCH_SECONDS=86400 SLICEMETER_BENCH_RAW=0 SLICEMETER_BENCH_1M=0 \
//	  go test -run '^$' -bench ResumeRecomputation -benchtime 1x -timeout 180m ./attribution/
func BenchmarkResumeRecomputation(b *testing.B) {
	f := newBenchFleet(b)
	if !f.storedMinute {
		b.Skip("SLICEMETER_BENCH_STORED=0: no stored minutes to attribute again")
	}
	ctx := context.Background()
	end := f.start.Add(time.Duration(f.seconds) * time.Second).Truncate(time.Minute)
	clock := end.Add(30 * time.Second)
	cfg := service.Passes{Delay: 30 * time.Second, Lookback: 10 * time.Minute, Backfill: time.Hour, MaxRecompute: end.Sub(f.start) + time.Hour,
		MaxMinutes: service.DefaultPasses.MaxMinutes, Samples: store.SecondRollup}
	runner := func(maxMinutes int) *service.Runner {
		c := cfg
		c.MaxMinutes = maxMinutes
		r := service.NewRunner(f.conn, benchBook, c, nil, slog.New(slog.DiscardHandler))
		r.SetClock(func() time.Time { return clock })
		return r
	}
	for b.Loop() {
		// The interrupted runner: a pass of a quarter of the fleet's time at most.
		if _, err := runner(min(cfg.MaxMinutes, f.seconds/60/4)).Once(ctx); err != nil {
			b.Fatal(err)
		}
		r := runner(cfg.MaxMinutes)
		began := time.Now()
		passes, left := 0, -1
		for {
			p, err := r.Once(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if passes++; left < 0 {
				s, m := r.Owed()
				left = s + m + int(p.To.Sub(p.From)/time.Minute)
			}
			if s, m := r.Owed(); s+m == 0 {
				break
			}
		}
		took := time.Since(began)
		b.ReportMetric(took.Seconds(), "resume-s")
		b.Logf("%d instances: the restarted runner attributed the %d minutes left in %d passes in %s (%.3f s a minute)", f.instances, left, passes,
			took.Round(time.Millisecond), took.Seconds()/float64(left))
		if err := stored.CheckAttributed(ctx, f.conn, f.start, end); err != nil {
			b.Fatal(err)
		}
	}
}
