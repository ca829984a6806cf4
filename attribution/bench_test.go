package attribution_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/advice"
	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/shard"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/attribution/stored"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

// The fleet of the benchmarks: SLICEMETER_BENCH_INSTANCES MIG instances (7 per A100, 8 A100s
// per node; default 56) over SLICEMETER_BENCH_SECONDS (default 3600), one allocation each for
// the whole time, ten tenants. samples_1s holds one row per instance and second, samples ten
// (10 Hz) unless SLICEMETER_BENCH_RAW=0. The target scale is 1000 instances × 86400 s
// (86.4M rollup rows): the daily report in ≤ 5 s, one minute in ≤ 2 s; and one minute of
// 10,000 instances with a day of history in ≤ 2 s, whatever the history. samples_1m holds one
// row per instance and minute, attribution_minutes one per allocation and minute (what the
// service stores). SLICEMETER_BENCH_1S=0 skips the report from samples_1s;
// SLICEMETER_BENCH_1M=0 skips samples_1m and what reads it (the minute from samples_1s reads
// it for the cold starts), SLICEMETER_BENCH_STORED=0 attribution_minutes. Each table is
// generated a slice of time at a time (benchSliceRows rows an INSERT), so that 10,000 or 50,000
// instances do not run one INSERT past the driver's read timeout. SLICEMETER_BENCH_QUERIES=1
// logs, for BenchmarkMinute, each query's time and the rows and bytes ClickHouse read for it
// (system.query_log), and reports the rows read: figures that a loaded machine does not change.
//
//	SLICEMETER_BENCH_INSTANCES=1000 SLICEMETER_BENCH_SECONDS=86400 SLICEMETER_BENCH_RAW=0 \
//	  go test -run '^$' -bench . -benchtime 3x ./attribution/
//	SLICEMETER_BENCH_INSTANCES=10000 SLICEMETER_BENCH_SECONDS=3600 SLICEMETER_BENCH_RAW=0 \
//	  SLICEMETER_BENCH_1M=0 SLICEMETER_BENCH_STORED=0 go test -run '^$' -bench 'Minute/samples_1s$' -benchtime 3x ./attribution/
type benchFleet struct {
	conn         driver.Conn
	start        time.Time
	instances    int
	seconds      int
	raw          bool
	minutes      bool // samples_1m generated
	storedMinute bool // attribution_minutes generated
	spec         chtest.BenchFleet
}

var benchStart = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)

// newBenchFleet generates the fleet the environment asks for inside ClickHouse
// (chtest.BenchFleet: INSERT … SELECT from system.numbers).
func newBenchFleet(b *testing.B) *benchFleet {
	b.Helper()
	spec := chtest.BenchFleetFromEnv(benchStart)
	f := &benchFleet{conn: newDatabase(b), start: spec.Start, instances: spec.Instances, seconds: spec.Seconds, raw: spec.Raw,
		minutes: spec.Minutes, storedMinute: spec.Stored}
	spec.Generate(b, f.conn)
	f.spec = spec
	return f
}

// BenchmarkAdvise: right-sizing (slicemeter advise) of the whole generated period from
// samples_1m, as the command reads it by default; the target is 7 days of 1000
// instances in ≤ 5 s. It reports the process's peak RSS (ru_maxrss; ClickHouse's memory is
// its own process's):
//
//	SLICEMETER_BENCH_INSTANCES=1000 SLICEMETER_BENCH_SECONDS=604800 SLICEMETER_BENCH_RAW=0 \
//	  SLICEMETER_BENCH_GEN_1S=0 SLICEMETER_BENCH_STORED=0 go test -run '^$' -bench Advise -benchtime 3x ./attribution/
func BenchmarkAdvise(b *testing.B) {
	f := newBenchFleet(b)
	to := f.start.Add(time.Duration(f.seconds) * time.Second)
	conn := newTimedQuerier(f.conn) // SLICEMETER_BENCH_QUERIES=1 logs each query's time
	n := 0
	for b.Loop() {
		n++
		res, err := advice.Compute(context.Background(), conn, benchBook, advice.Options{From: f.start, To: to, Samples: store.MinuteRollup,
			Headroom: advice.DefaultHeadroom, MinMeasured: advice.DefaultMinMeasured, Now: to.Add(time.Hour)})
		if err != nil || len(res.Rows) != f.instances {
			b.Fatalf("advice: %d rows, %v; want %d", len(res.Rows), err, f.instances)
		}
	}
	b.StopTimer()
	conn.Log(b, "", n)
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		b.ReportMetric(float64(ru.Maxrss)/1024, "peak-rss-MiB")
	}
}

// has says whether the fleet generated source.
func (f *benchFleet) has(source store.Samples) bool {
	switch source {
	case store.RawSamples:
		return f.raw
	case store.MinuteRollup:
		return f.minutes
	}
	return true
}

var benchBook = &pricebook.PriceBook{Currency: "USD", Prices: map[string]float64{"A100-SXM4-40GB": 1.6}, Tiers: map[string]float64{"pro": 1}}

// BenchmarkReport: the per-tenant report of the whole generated period (the daily report at
// the target scale), from the raw samples and from the per-second rollup.
func BenchmarkReport(b *testing.B) {
	f := newBenchFleet(b)
	to := f.start.Add(time.Duration(f.seconds) * time.Second)
	b.Run("attribution_minutes", func(b *testing.B) {
		if !f.storedMinute {
			b.Skip("SLICEMETER_BENCH_STORED=0")
		}
		for b.Loop() {
			rep, err := stored.FromMinutes(context.Background(), f.conn, f.start, to)
			if err != nil || len(rep.Tenants) != min(10, f.instances) {
				b.Fatalf("report from stored minutes: %d tenants, %v", len(rep.Tenants), err)
			}
		}
	})
	for _, source := range []store.Samples{store.MinuteRollup, store.SecondRollup, store.RawSamples} {
		if !f.has(source) || source == store.SecondRollup && os.Getenv("SLICEMETER_BENCH_1S") == "0" {
			continue
		}
		b.Run(source.String(), func(b *testing.B) {
			for b.Loop() {
				rep, err := reportOf(context.Background(), f.conn, f.start, to, benchBook, source)
				if err != nil || len(rep.Tenants) != min(10, f.instances) {
					b.Fatalf("report: %d tenants, %v", len(rep.Tenants), err)
				}
			}
			b.ReportMetric(float64(f.instances*f.seconds), "rollup-rows")
		})
	}
}

// BenchmarkMinute: one minute of the fleet attributed per allocation (what the service does
// every minute, with the GPUs' presence its pass read: BenchmarkContinuousPresence), by one
// replica from each source, and by two replicas sharing the nodes (samples_1s/shards=2), each
// from scratch; samples_1s/remembered is the minute as the service's passes compute it once
// they know the allocations' first attached samples (store.ColdStarts). The minute is the middle
// of the period, or half an hour before its end with SLICEMETER_BENCH_1S_TAIL=N (samples_1s
// generated for the last N seconds only, chtest.BenchFleet.TailSeconds): a day of 50,000
// instances that way:
//
//	SLICEMETER_BENCH_QUERIES=1 SLICEMETER_BENCH_INSTANCES=50000 SLICEMETER_BENCH_SECONDS=86400 \
//	  SLICEMETER_BENCH_1S_TAIL=5400 SLICEMETER_BENCH_RAW=0 SLICEMETER_BENCH_STORED=0 \
//	  go test -run '^$' -bench 'BenchmarkMinute/samples_1s' -benchtime 2x -timeout 60m -v ./attribution/
func BenchmarkMinute(b *testing.B) {
	f := newBenchFleet(b)
	ctx := context.Background()
	from := f.spec.Minute()
	for _, source := range []store.Samples{store.MinuteRollup, store.SecondRollup, store.RawSamples} {
		if !f.has(source) {
			continue
		}
		b.Run(source.String(), func(b *testing.B) {
			var none *store.Presence
			p, err := none.Advance(ctx, f.conn, source, billing.Interval{Start: from.UnixNano(), End: from.Add(time.Minute).UnixNano()}, attribution.DefaultPresence)
			if err != nil {
				b.Fatal(err)
			}
			conn, n := newTimedQuerier(f.conn), 0
			for b.Loop() {
				res, err := attribution.Report(ctx, conn, benchBook, attribution.Options{From: from, To: from.Add(time.Minute), Samples: source, Lines: true, Present: p})
				if err != nil || len(res.Lines) != f.instances {
					b.Fatalf("minute: %d lines, %v", len(res.Lines), err)
				}
				n++
			}
			if read := conn.Log(b, "", n); read > 0 {
				b.ReportMetric(read/1e6, "Mrows-read")
			}
		})
	}
	b.Run(store.SecondRollup.String()+"/remembered", func(b *testing.B) {
		var none *store.Presence
		p, err := none.Advance(ctx, f.conn, store.SecondRollup, billing.Interval{Start: from.UnixNano(), End: from.Add(time.Minute).UnixNano()}, attribution.DefaultPresence)
		if err != nil {
			b.Fatal(err)
		}
		// What the service's passes know after their first: the first attached samples before
		// the lookback (the service's default, 10 minutes).
		known := store.NewColdStarts()
		known.Pass(from.Add(-10 * time.Minute))
		o := attribution.Options{From: from, To: from.Add(time.Minute), Samples: store.SecondRollup, Lines: true, Present: p, ColdStarts: known}
		if _, err := attribution.Report(ctx, f.conn, benchBook, o); err != nil {
			b.Fatal(err)
		}
		if known.Len() != f.instances {
			b.Fatalf("%d first attached samples remembered of %d allocations", known.Len(), f.instances)
		}
		conn, n := newTimedQuerier(f.conn), 0
		for b.Loop() {
			res, err := attribution.Report(ctx, conn, benchBook, o)
			if err != nil || len(res.Lines) != f.instances {
				b.Fatalf("minute: %d lines, %v", len(res.Lines), err)
			}
			n++
		}
		if read := conn.Log(b, "", n); read > 0 {
			b.ReportMetric(read/1e6, "Mrows-read")
		}
	})
	// The same minute from samples_1s as two replicas share it (the Kafka group's mapping of
	// nodes to partitions, shard.Partition), one after the other: their lines and unallocated
	// capacity by node together are the one replica's, to the bit; shard0-s and shard1-s are
	// each replica's time for the minute.
	b.Run(store.SecondRollup.String()+"/shards=2", func(b *testing.B) {
		var none *store.Presence
		p, err := none.Advance(ctx, f.conn, store.SecondRollup, billing.Interval{Start: from.UnixNano(), End: from.Add(time.Minute).UnixNano()}, attribution.DefaultPresence)
		if err != nil {
			b.Fatal(err)
		}
		o := attribution.Options{From: from, To: from.Add(time.Minute), Samples: store.SecondRollup, Lines: true, Present: p}
		one, err := attribution.Report(ctx, f.conn, benchBook, o)
		if err != nil || len(one.Lines) != f.instances {
			b.Fatalf("minute: %d lines, %v", len(one.Lines), err)
		}
		var (
			took  [2]time.Duration
			conns = [2]*timedQuerier{newTimedQuerier(f.conn), newTimedQuerier(f.conn)}
			n     int
		)
		for b.Loop() {
			var union attribution.Result
			union.Report.UnallocatedByNode = map[string]float64{}
			for s := range took {
				o.Nodes = func(node string) bool { return shard.Partition(node, len(took)) == s }
				began := time.Now()
				res, err := attribution.Report(ctx, conns[s], benchBook, o)
				took[s] += time.Since(began)
				if err != nil {
					b.Fatalf("shard %d: %v", s, err)
				}
				union.Lines = append(union.Lines, res.Lines...)
				maps.Copy(union.Report.UnallocatedByNode, res.Report.UnallocatedByNode)
			}
			n++
			checkUnion(b, one, union)
		}
		for s, d := range took {
			b.ReportMetric(d.Seconds()/float64(n), fmt.Sprintf("shard%d-s", s))
			if read := conns[s].Log(b, fmt.Sprintf("shard %d: ", s), n); read > 0 {
				b.ReportMetric(read/1e6, fmt.Sprintf("shard%d-Mrows-read", s))
			}
		}
	})
}

// checkUnion fails unless the shards' lines and unallocated capacity by node, together, are
// the one replica's: what the service stores of a minute.
func checkUnion(b *testing.B, one, union attribution.Result) {
	b.Helper()
	byID := func(x, y billing.Line) int { return strings.Compare(x.AllocationID, y.AllocationID) }
	want, got := slices.SortedFunc(slices.Values(one.Lines), byID), slices.SortedFunc(slices.Values(union.Lines), byID)
	if !reflect.DeepEqual(got, want) {
		b.Fatalf("the shards' %d lines are not the one replica's %d", len(got), len(want))
	}
	if !maps.Equal(union.Report.UnallocatedByNode, one.Report.UnallocatedByNode) {
		b.Fatalf("the shards' unallocated capacity by node (%d nodes) is not the one replica's (%d)",
			len(union.Report.UnallocatedByNode), len(one.Report.UnallocatedByNode))
	}
}

// BenchmarkContinuousPresence reads the presence of a usual pass — the lookback's ten minutes
// and one fresh — with a presence period of an hour, over the benchmark fleet (bench_test.go;
// SLICEMETER_BENCH_INSTANCES, SLICEMETER_BENCH_RAW=0 for samples_1s only): "first" reads it
// all, as after a start; "next" only what the pass a minute before had not read, as the
// service's passes do.
func BenchmarkContinuousPresence(b *testing.B) {
	f := newBenchFleet(b)
	ctx := context.Background()
	end := f.start.Add(time.Duration(f.seconds) * time.Second).Truncate(time.Minute)
	pass := func(from, to time.Time) billing.Interval {
		return billing.Interval{Start: from.UnixNano(), End: to.UnixNano()}
	}
	check := func(b *testing.B, p *store.Presence) {
		c, err := p.Capacity(pass(end.Add(-time.Minute), end))
		if err != nil || len(c) != (f.instances+6)/7 {
			b.Fatalf("every GPU is sampled in every minute: %d of %d GPUs present, %v", len(c), (f.instances+6)/7, err)
		}
	}
	for _, source := range []store.Samples{store.MinuteRollup, store.SecondRollup, store.RawSamples} {
		if !f.has(source) {
			continue
		}
		b.Run(source.String()+"/first", func(b *testing.B) {
			for b.Loop() {
				var none *store.Presence
				p, err := none.Advance(ctx, f.conn, source, pass(end.Add(-11*time.Minute), end), time.Hour)
				if err != nil {
					b.Fatal(err)
				}
				check(b, p)
			}
		})
		b.Run(source.String()+"/next", func(b *testing.B) {
			var none *store.Presence
			before, err := none.Advance(ctx, f.conn, source, pass(end.Add(-12*time.Minute), end.Add(-time.Minute)), time.Hour)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				p, err := before.Advance(ctx, f.conn, source, pass(end.Add(-11*time.Minute), end), time.Hour)
				if err != nil {
					b.Fatal(err)
				}
				check(b, p)
			}
		})
	}
}

// timedQuerier times each query it runs (chtest.TimedConn): SLICEMETER_BENCH_QUERIES=1 logs,
// per query, the time and the rows and bytes read.
type timedQuerier = chtest.TimedConn

func newTimedQuerier(conn driver.Conn) *timedQuerier { return chtest.NewTimedConn(conn) }
