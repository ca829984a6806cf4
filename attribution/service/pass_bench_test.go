package service

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/internal/lograte"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

var passBenchBook = &pricebook.PriceBook{Currency: "USD", Prices: map[string]float64{"A100-SXM4-40GB": 1.6}, Tiers: map[string]float64{"pro": 1}}

// staticShards is a fixed share of the nodes: replica index of n owns the nodes whose FNV-1a
// hash is index mod n (shard.Partition's mapping; package shard imports this one).
type staticShards struct{ index, n int }

func (s staticShards) Assignment() (Assignment, bool) {
	return Assignment{Generation: 1, Owns: func(node string) bool {
		h := fnv.New32a()
		_, _ = h.Write([]byte(node))
		return int(h.Sum32()%uint32(s.n)) == s.index
	}}, true
}

// BenchmarkPass: one whole pass of the attribution service (service.pass, what it does every
// --attribution.interval) over the benchmark fleet (chtest.BenchFleet, from the environment:
// SLICEMETER_BENCH_INSTANCES, SLICEMETER_BENCH_SECONDS, SLICEMETER_BENCH_RAW=0 …), near the
// end of its samples, from samples_1s (the service's default) with its default passes: the
// fresh minute and the lookback's ten attributed again, stored, the hours rolled up, the fleet
// gauges from the stored minutes, and the trailing hour's report for the tenant gauges. The
// advice gauges (a week from samples_1m, once an hour: adviceEvery) are computed apart from the
// passes (adviseLoop), so not here. "minute" is one minute's report (what a pass does
// eleven times; BenchmarkMinute in package attribution), on the same data: one generation of a
// large fleet gives both. "shards=2" is the same pass by each of two replicas sharing the nodes
// (shard.Partition), one after the other: shard0-s and shard1-s each one's time.
//
//	SLICEMETER_BENCH_QUERIES=1 SLICEMETER_BENCH_INSTANCES=10000 SLICEMETER_BENCH_SECONDS=86400 SLICEMETER_BENCH_RAW=0 \
//	  SLICEMETER_BENCH_STORED=0 go test -run '^$' -bench Pass -benchtime 3x -timeout 120m ./attribution/service/
func BenchmarkPass(b *testing.B) {
	f := chtest.BenchFleetFromEnv(time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC))
	if !f.Minutes || f.NoSeconds {
		b.Skip("the pass reads samples_1s and samples_1m: SLICEMETER_BENCH_1M=0 and SLICEMETER_BENCH_GEN_1S=0 leave them out")
	}
	f.Stored = false // the passes store their own minutes
	conn := chtest.NewDatabase(b, nil)
	f.Generate(b, conn)
	b.ReportMetric(f.Took.Seconds(), "generate-s")
	ctx := context.Background()
	// The passes run 20 minutes before the samples end (a minute later each op): the trailing
	// window and the lookback see a fleet that is still sampled.
	base := f.End().Add(-20 * time.Minute).Truncate(time.Minute).Add(30 * time.Second)
	if f.Seconds < 40*60 {
		b.Fatalf("SLICEMETER_BENCH_SECONDS=%d: the pass needs at least 2400 s of samples", f.Seconds)
	}

	b.Run("minute", func(b *testing.B) {
		from := base.Truncate(time.Minute).Add(-time.Minute)
		var none *store.Presence
		p, err := none.Advance(ctx, conn, store.SecondRollup, billing.Interval{Start: from.UnixNano(), End: from.Add(time.Minute).UnixNano()}, attribution.DefaultPresence)
		if err != nil {
			b.Fatal(err)
		}
		timed, n := chtest.NewTimedConn(conn), 0
		for b.Loop() {
			res, err := attribution.Report(ctx, timed, passBenchBook, attribution.Options{From: from, To: from.Add(time.Minute), Samples: store.SecondRollup, Lines: true, Present: p,
				Now: base})
			if err != nil || len(res.Lines) != f.Instances {
				b.Fatalf("minute: %d lines, %v", len(res.Lines), err)
			}
			n++
		}
		timed.Log(b, "", n)
	})

	// The trailing window's report for the tenant gauges alone (what a pass adds to its
	// minutes), from where the pass reads it (windowSamples), its edges inside minutes.
	b.Run("window", func(b *testing.B) {
		to := base.Add(-7 * time.Second)
		timed, n := chtest.NewTimedConn(conn), 0
		for b.Loop() {
			res, err := attribution.Report(ctx, timed, passBenchBook, attribution.Options{From: to.Add(-time.Hour), To: to, Samples: windowSamples(store.SecondRollup),
				Presence: attribution.DefaultPresence, Now: base})
			if err != nil || len(res.Report.Tenants) == 0 {
				b.Fatalf("window: %d tenants, %v", len(res.Report.Tenants), err)
			}
			n++
		}
		if read := timed.Log(b, "", n); read > 0 {
			b.ReportMetric(read/1e6, "Mrows-read")
		}
	})

	// run measures the passes of the replicas (one service each, storing into the same
	// database, each its own nodes' rows, as the replicas of a group do), one after the other.
	run := func(b *testing.B, replicas int) {
		b.Helper()
		// Each run stores its minutes afresh: the minutes of an earlier run would be the
		// resumed state.
		if err := conn.Exec(ctx, "TRUNCATE TABLE attribution_minutes"); err != nil {
			b.Fatal(err)
		}
		clock := base
		now := func() time.Time { return clock }
		services := make([]*service, replicas)
		timed := make([]*chtest.TimedConn, replicas)
		for i := range services {
			timed[i] = chtest.NewTimedConn(conn)
			passes := Passes{Delay: 30 * time.Second, Lookback: 10 * time.Minute, Backfill: 10 * time.Minute, MaxRecompute: 31 * 24 * time.Hour,
				MaxMinutes: DefaultPasses.MaxMinutes, Samples: store.SecondRollup, Presence: attribution.DefaultPresence}
			if replicas > 1 {
				passes.Shards = staticShards{index: i, n: replicas}
			}
			services[i] = newBenchService(timed[i], passes, now)
		}
		// The warm-up pass: the first after a start (the lookback's minutes).
		for i, s := range services {
			began := time.Now()
			s.pass(ctx)
			b.Logf("replica %d: the first pass (resume, %d minutes) took %s", i, 11, time.Since(began).Round(time.Millisecond))
			timed[i] = chtest.NewTimedConn(conn)
			s.conn, s.runner.conn = timed[i], timed[i]
		}
		took := make([]time.Duration, replicas)
		n := 0
		for b.Loop() {
			clock = clock.Add(time.Minute)
			for i, s := range services {
				began := time.Now()
				if behind := s.pass(ctx); behind {
					b.Fatalf("replica %d: the pass left minutes waiting", i)
				}
				took[i] += time.Since(began)
			}
			n++
		}
		for i := range services {
			if replicas > 1 {
				b.ReportMetric(took[i].Seconds()/float64(n), fmt.Sprintf("shard%d-s", i))
			}
			if read := timed[i].Log(b, fmt.Sprintf("replica %d: ", i), n); read > 0 {
				b.ReportMetric(read/1e6, fmt.Sprintf("replica%d-Mrows-read", i))
			}
		}
	}
	b.Run("pass", func(b *testing.B) { run(b, 1) })
	b.Run("pass/shards=2", func(b *testing.B) { run(b, 2) })
}

// newBenchService is the service as Run builds it, without serving, on conn, with its clock
// (and its runner's) at now.
func newBenchService(conn *chtest.TimedConn, passes Passes, now func() time.Time) *service {
	logger := slog.New(slog.DiscardHandler)
	reg := prometheus.NewRegistry()
	cfg := Config{Book: passBenchBook, Interval: time.Minute, Window: time.Hour, Passes: passes}
	s := &service{cfg: cfg, conn: conn, logger: logger, logs: lograte.New(logger, time.Minute), sla: newSLAMetrics(reg, cfg.Book),
		progress: progress{logger: logger}, now: now}
	s.runner = NewRunner(conn, cfg.Book, passes, s.sla, logger)
	s.runner.SetClock(now)
	s.fleet = newFleetMetrics(reg, s.tenantLimit())
	s.advice = newAdviceMetrics(reg)
	return s
}
