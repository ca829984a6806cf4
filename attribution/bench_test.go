package attribution_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/advice"
	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/shard"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/attribution/stored"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
	"github.com/slicemeter/slicemeter/schemas/tables"
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
}

// benchSliceRows bounds the rows of one generating INSERT.
const benchSliceRows = 10_000_000

// generate runs an INSERT … SELECT of steps rows an instance (seconds, minutes or ticks) for
// every instance, a slice of the steps at a time with every instance, in time order, as the
// collector writes them (so that each part holds a stretch of time, as in production). In query,
// {{first}} is the slice's first step and {{rows}} its rows: the step is
// "{{first}} + intDiv(number, instances)", the instance "number % instances".
func (f *benchFleet) generate(b *testing.B, what, query string, steps int) {
	b.Helper()
	per := max(1, benchSliceRows/f.instances)
	for first := 0; first < steps; first += per {
		n := min(per, steps-first)
		q := strings.NewReplacer("{{first}}", strconv.Itoa(first), "{{rows}}", strconv.Itoa(n*f.instances)).Replace(query)
		if err := f.conn.Exec(context.Background(), q); err != nil {
			b.Fatalf("generate %s (steps %d to %d): %v", what, first, first+n, err)
		}
	}
}

var benchStart = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// newBenchFleet generates the fleet inside ClickHouse (INSERT … SELECT from system.numbers).
func newBenchFleet(b *testing.B) *benchFleet {
	b.Helper()
	f := &benchFleet{conn: newDatabase(b), start: benchStart, instances: envInt("SLICEMETER_BENCH_INSTANCES", 56),
		seconds: envInt("SLICEMETER_BENCH_SECONDS", 3600), raw: os.Getenv("SLICEMETER_BENCH_RAW") != "0",
		minutes: os.Getenv("SLICEMETER_BENCH_1M") != "0", storedMinute: os.Getenv("SLICEMETER_BENCH_STORED") != "0"}
	ctx := context.Background()
	began := time.Now()
	start := f.start.UnixNano()
	// Facts of instance i: node-(i/56), GPU-(i/7), gpu((i/7)%8)/mig(i%7), a 1g.5gb of an A100.
	const facts = `concat('node-', toString(intDiv(inst, 56))), concat('GPU-', toString(intDiv(inst, 7))),
        toUInt32(intDiv(inst, 7) % 8), 'A100-SXM4-40GB', 'mig',
        concat('gpu', toString(intDiv(inst, 7) % 8), '/mig', toString(inst % 7)), '1g.5gb'`
	rollup := fmt.Sprintf(`INSERT INTO samples_1s (node, gpu_uuid, gpu_index, model, kind, instance_id, profile, time,
    compute_slices, sm_count, gpu_sm_count, mem_total_bytes, gpu_mem_total_bytes, interval_ns,
    samples, covered_ns, sm_active_sum, attached_sum, vgpu_switch_ns_sum, vgpu_run_ns_sum,
    first_attached_ns, mem_used_bytes_sum, power_watts_sum, wait_ns, wait_count, first_ns, last_ns)
SELECT %s, toDateTime(intDiv(ts, 1000000000)),
    toUInt32(1), toUInt32(14), toUInt32(108), toUInt64(5368709120), toUInt64(42949672960), toUInt64(100000000),
    toUInt64(10), toUInt64(1000000000), (sec %% 10) / 2., toUInt64(10), toUInt64(0), toUInt64(0),
    ts, 1e10, 2000., emptyArrayUInt64(), emptyArrayUInt64(), ts, ts + 900000000
FROM (SELECT {{first}} + intDiv(number, %d) AS sec, number %% %d AS inst, toUInt64(%d + sec * 1000000000) AS ts FROM system.numbers LIMIT {{rows}})`,
		facts, f.instances, f.instances, start)
	// SLICEMETER_BENCH_GEN_1S=0 leaves samples_1s empty, for what reads only samples_1m over
	// whole minutes (BenchmarkAdvise over a week: 604.8M rows of 1000 instances otherwise).
	if os.Getenv("SLICEMETER_BENCH_GEN_1S") != "0" {
		f.generate(b, "samples_1s", rollup, f.seconds)
	}
	minutes := fmt.Sprintf(`INSERT INTO samples_1m (node, gpu_uuid, gpu_index, model, kind, instance_id, profile, time,
    compute_slices, sm_count, gpu_sm_count, mem_total_bytes, gpu_mem_total_bytes, interval_ns,
    samples, covered_ns, sm_active_sum, attached_sum, vgpu_switch_ns_sum, vgpu_run_ns_sum,
    first_attached_ns, mem_used_bytes_sum, power_watts_sum, wait_ns, wait_count, first_ns, last_ns)
SELECT %s, toDateTime(intDiv(ts, 1000000000)),
    toUInt32(1), toUInt32(14), toUInt32(108), toUInt64(5368709120), toUInt64(42949672960), toUInt64(100000000),
    toUInt64(600), toUInt64(60000000000), 135., toUInt64(600), toUInt64(0), toUInt64(0),
    ts, 6e11, 120000., emptyArrayUInt64(), emptyArrayUInt64(), ts, ts + 59900000000
FROM (SELECT {{first}} + intDiv(number, %d) AS m, number %% %d AS inst, toUInt64(%d + m * 60000000000) AS ts FROM system.numbers LIMIT {{rows}})`,
		facts, f.instances, f.instances, start)
	if f.minutes {
		f.generate(b, "samples_1m", minutes, f.seconds/60)
	}
	if f.raw {
		ticks := f.seconds * 10
		raw := fmt.Sprintf(`INSERT INTO samples (node, gpu_uuid, gpu_index, model, kind, instance_id, profile, time, ts_ns,
    interval_ns, attached, sm_active, mem_used_bytes, mem_total_bytes, power_watts, compute_slices, sm_count,
    gpu_sm_count, gpu_mem_total_bytes, vgpu_run_ns, vgpu_switch_ns, vgpu_waits_ns)
SELECT %s, toDateTime(intDiv(ts, 1000000000)), ts,
    toUInt64(100000000), toUInt8(1), (intDiv(tick, 10) %% 10) / 20., toUInt64(1000000000), toUInt64(5368709120), 200.,
    toUInt32(1), toUInt32(14), toUInt32(108), toUInt64(42949672960), toUInt64(0), toUInt64(0), emptyArrayUInt64()
FROM (SELECT {{first}} + intDiv(number, %d) AS tick, number %% %d AS inst, toUInt64(%d + tick * 100000000) AS ts FROM system.numbers LIMIT {{rows}})`,
			facts, f.instances, f.instances, start)
		f.generate(b, "samples", raw, ticks)
	}
	// The attribution service's stored minutes: one row per allocation and minute, and the
	// unallocated row of each minute.
	insertMinutes := fmt.Sprintf(`INSERT INTO attribution_minutes (minute, tenant, allocation_id, tier, node, instance_id,
    requested_ns, started_ns, sliced, billed_ns, metered_ns, list_cost, cost, waste_cost, overhead_cost, efficiency_ns,
    cold_start_ns, cold_start_sla_ns, wait_ns, wait_count, currency, computed_ns)
SELECT toDateTime(intDiv(%d, 1000000000) + m * 60), if(inst < %d, concat('tenant-', toString(inst %% 10)), '__unallocated__'),
    if(inst < %d, concat('a', toString(inst)), ''), 'pro', '', '', toInt64(%d), toInt64(%d), toUInt8(0),
    toInt64(60000000000), toInt64(60000000000), 1.6 / 7 / 60, 1.6 / 7 / 60, 0.01, 0.002, 27e9, toInt64(0), toInt64(30000000000),
    emptyArrayUInt64(), emptyArrayUInt64(), 'USD', toUInt64(1)
FROM (SELECT number %% %d AS m, intDiv(number, %d) AS inst FROM system.numbers LIMIT %d)`,
		start, f.instances, f.instances, start, start, f.seconds/60, f.seconds/60, (f.instances+1)*(f.seconds/60))
	if f.storedMinute {
		if err := f.conn.Exec(ctx, insertMinutes); err != nil {
			b.Fatalf("generate attribution_minutes: %v", err)
		}
	}
	end := f.start.Add(time.Duration(f.seconds) * time.Second).UnixNano()
	allocs := tables.Insert(tables.Allocations, tables.AllocationColumns) + fmt.Sprintf(`
SELECT concat('a', toString(inst)), concat('tenant-', toString(inst %% 10)), 'pro', concat('node-', toString(intDiv(inst, 56))),
    concat('gpu', toString(intDiv(inst, 7) %% 8), '/mig', toString(inst %% 7)), toInt64(%d), toInt64(%d), toInt64(%d), toUInt64(1), toUInt8(0), now()
FROM (SELECT number AS inst FROM system.numbers LIMIT %d)`, start, start, end, f.instances)
	if err := f.conn.Exec(ctx, allocs); err != nil {
		b.Fatalf("generate allocations: %v", err)
	}
	b.Logf("fleet: %d instances × %d s: %d rollup rows, raw %v (%d rows), samples_1m %v, attribution_minutes %v, generated in %s",
		f.instances, f.seconds, f.instances*f.seconds, f.raw, f.instances*f.seconds*10, f.minutes, f.storedMinute, time.Since(began).Round(time.Millisecond))
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
	conn.log(b, "", n)
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
// replica from each source, and by two replicas sharing the nodes (samples_1s/shards=2).
func BenchmarkMinute(b *testing.B) {
	f := newBenchFleet(b)
	ctx := context.Background()
	from := f.start.Add(time.Duration(f.seconds/2) * time.Second).Truncate(time.Minute)
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
			if read := conn.log(b, "", n); read > 0 {
				b.ReportMetric(read/1e6, "Mrows-read")
			}
		})
	}
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
			if read := conns[s].log(b, fmt.Sprintf("shard %d: ", s), n); read > 0 {
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

// timedQuerier times each query it runs, to its last row, by the query's text from its first
// FROM, and has ClickHouse log them (log_queries) under IDs of its own, for what they read:
// SLICEMETER_BENCH_QUERIES=1 logs, per query, the time and the rows and bytes read (where a
// minute's time goes, and the figures that a loaded machine does not change).
type timedQuerier struct {
	conn  driver.Conn
	mu    sync.Mutex
	total map[string]time.Duration
	count map[string]int
	names map[string]string // query ID → name
}

func newTimedQuerier(conn driver.Conn) *timedQuerier {
	return &timedQuerier{conn: conn, total: map[string]time.Duration{}, count: map[string]int{}, names: map[string]string{}}
}

func (q *timedQuerier) Query(ctx context.Context, query string, args ...any) (driver.Rows, error) {
	name := queryName(query)
	q.mu.Lock()
	id := fmt.Sprintf("bench-%p-%d", q, len(q.names))
	q.names[id] = name
	q.mu.Unlock()
	// The chunks' queries raise max_query_size (store's chunkContext): these settings replace theirs.
	ctx = clickhouse.Context(ctx, clickhouse.WithQueryID(id), clickhouse.WithSettings(clickhouse.Settings{"log_queries": 1, "max_query_size": 128 << 20}))
	began := time.Now()
	rows, err := q.conn.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return &timedRows{Rows: rows, q: q, name: name, began: began}, nil
}

// queryName is what tells the queries apart: the start of the text from its first FROM.
func queryName(query string) string {
	s := strings.Join(strings.Fields(query), " ")
	if i := strings.Index(s, "FROM"); i >= 0 {
		s = s[i:]
	}
	return s[:min(len(s), 90)]
}

// log logs, with SLICEMETER_BENCH_QUERIES=1, each query's time, and the rows and bytes that
// ClickHouse read for it, per op (n ops), under prefix; it returns the rows read per op.
func (q *timedQuerier) log(b *testing.B, prefix string, n int) float64 {
	b.Helper()
	if os.Getenv("SLICEMETER_BENCH_QUERIES") != "1" {
		return 0
	}
	ctx := context.Background()
	if err := q.conn.Exec(ctx, "SYSTEM FLUSH LOGS"); err != nil {
		b.Fatal(err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	read := map[string][2]uint64{}
	rows, err := q.conn.Query(ctx, `SELECT query_id, read_rows, read_bytes FROM system.query_log WHERE type = 2 AND query_id LIKE ?`, fmt.Sprintf("bench-%p-%%", q))
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id          string
			nRows, size uint64
		)
		if err := rows.Scan(&id, &nRows, &size); err != nil {
			b.Fatal(err)
		}
		r := read[q.names[id]]
		read[q.names[id]] = [2]uint64{r[0] + nRows, r[1] + size}
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	var all uint64
	for _, name := range slices.Sorted(maps.Keys(q.total)) {
		per := float64(max(n, 1))
		b.Logf("%s%7.3f s, %6.2f M rows, %7.1f MB read, %d queries/op: %s", prefix, q.total[name].Seconds()/per,
			float64(read[name][0])/per/1e6, float64(read[name][1])/per/1e6, q.count[name]/max(n, 1), name)
		all += read[name][0]
	}
	return float64(all) / float64(max(n, 1))
}

type timedRows struct {
	driver.Rows
	q     *timedQuerier
	name  string
	began time.Time
}

func (r *timedRows) Close() error {
	err := r.Rows.Close()
	r.q.mu.Lock()
	r.q.total[r.name] += time.Since(r.began)
	r.q.count[r.name]++
	r.q.mu.Unlock()
	return err
}
