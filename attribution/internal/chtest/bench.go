package chtest

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/schemas/tables"
)

// BenchFleet is the fleet of the benchmarks (attribution's and the service's), generated inside
// ClickHouse (INSERT … SELECT from system.numbers): Instances MIG instances (7 per A100, 8
// A100s per node) over Seconds from Start, one allocation each for the whole time, ten
// tenants. samples_1s holds one row per instance and second, samples ten (10 Hz) with Raw,
// samples_1m one row per instance and minute with Minutes, attribution_minutes one per
// allocation and minute (what the service stores) with Stored.
type BenchFleet struct {
	Instances int
	Seconds   int
	Start     time.Time
	// Raw: the raw samples (10 Hz); NoSeconds leaves samples_1s empty (what reads only
	// samples_1m over whole minutes: BenchmarkAdvise over a week, 604.8M rows of 1000
	// instances otherwise); Minutes: samples_1m; Stored: attribution_minutes.
	Raw, NoSeconds, Minutes, Stored bool
	// Open: the allocations are still running (no end), as the service sees them live.
	Open bool
	// TailSeconds, when positive, generates samples_1s (and raw samples) only for the last
	// TailSeconds of the period, the rest of the tables for all of it: what a minute near the
	// end reads of samples_1s (sorted by time first) is the same, and a day of 50,000 instances
	// is 4.32 billion rows, 80 minutes of generation on the 2-core machine. What grows with the
	// allocations' age (the cold-start search in samples_1m) sees the whole period.
	TailSeconds int
	// Took is how long the generation took (what reproducing a figure costs first).
	Took time.Duration
}

// BenchFleetFromEnv is the fleet the environment asks for, from start:
// SLICEMETER_BENCH_INSTANCES (default 56), SLICEMETER_BENCH_SECONDS (default 3600),
// SLICEMETER_BENCH_RAW=0 (no raw samples), SLICEMETER_BENCH_GEN_1S=0 (no samples_1s),
// SLICEMETER_BENCH_1M=0 (no samples_1m), SLICEMETER_BENCH_STORED=0 (no attribution_minutes).
func BenchFleetFromEnv(start time.Time) BenchFleet {
	return BenchFleet{Start: start, Instances: EnvInt("SLICEMETER_BENCH_INSTANCES", 56), Seconds: EnvInt("SLICEMETER_BENCH_SECONDS", 3600),
		Raw: os.Getenv("SLICEMETER_BENCH_RAW") != "0", NoSeconds: os.Getenv("SLICEMETER_BENCH_GEN_1S") == "0",
		Minutes: os.Getenv("SLICEMETER_BENCH_1M") != "0", Stored: os.Getenv("SLICEMETER_BENCH_STORED") != "0",
		TailSeconds: EnvInt("SLICEMETER_BENCH_1S_TAIL", 0)}
}

// tail is the first second with samples_1s and raw samples.
func (f *BenchFleet) tail() int {
	if f.TailSeconds > 0 && f.TailSeconds < f.Seconds {
		return f.Seconds - f.TailSeconds
	}
	return 0
}

// Minute is the minute the benchmarks attribute: the middle of the period, or, with
// TailSeconds, half an hour before its end (its hour of presence before it is in the tail).
func (f *BenchFleet) Minute() time.Time {
	if f.tail() > 0 {
		return f.End().Add(-30 * time.Minute).Truncate(time.Minute)
	}
	return f.Start.Add(time.Duration(f.Seconds/2) * time.Second).Truncate(time.Minute)
}

// EnvInt is the positive integer in the environment variable name, or def.
func EnvInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// benchSliceRows bounds the rows of one generating INSERT, so that 10,000 or 50,000 instances
// do not run one INSERT past the driver's read timeout.
const benchSliceRows = 10_000_000

// End is the end of the fleet's samples.
func (f *BenchFleet) End() time.Time { return f.Start.Add(time.Duration(f.Seconds) * time.Second) }

// Generate writes the fleet into conn's database and sets Took.
func (f *BenchFleet) Generate(tb testing.TB, conn driver.Conn) {
	tb.Helper()
	ctx := context.Background()
	began := time.Now()
	start := f.Start.UnixNano()
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
		facts, f.Instances, f.Instances, start)
	if !f.NoSeconds {
		f.generate(tb, conn, "samples_1s", rollup, f.tail(), f.Seconds)
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
		facts, f.Instances, f.Instances, start)
	if f.Minutes {
		f.generate(tb, conn, "samples_1m", minutes, 0, f.Seconds/60)
	}
	if f.Raw {
		ticks := f.Seconds * 10
		raw := fmt.Sprintf(`INSERT INTO samples (node, gpu_uuid, gpu_index, model, kind, instance_id, profile, time, ts_ns,
    interval_ns, attached, sm_active, mem_used_bytes, mem_total_bytes, power_watts, compute_slices, sm_count,
    gpu_sm_count, gpu_mem_total_bytes, vgpu_run_ns, vgpu_switch_ns, vgpu_waits_ns)
SELECT %s, toDateTime(intDiv(ts, 1000000000)), ts,
    toUInt64(100000000), toUInt8(1), (intDiv(tick, 10) %% 10) / 20., toUInt64(1000000000), toUInt64(5368709120), 200.,
    toUInt32(1), toUInt32(14), toUInt32(108), toUInt64(42949672960), toUInt64(0), toUInt64(0), emptyArrayUInt64()
FROM (SELECT {{first}} + intDiv(number, %d) AS tick, number %% %d AS inst, toUInt64(%d + tick * 100000000) AS ts FROM system.numbers LIMIT {{rows}})`,
			facts, f.Instances, f.Instances, start)
		f.generate(tb, conn, "samples", raw, f.tail()*10, ticks)
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
		start, f.Instances, f.Instances, start, start, f.Seconds/60, f.Seconds/60, (f.Instances+1)*(f.Seconds/60))
	if f.Stored {
		if err := conn.Exec(ctx, insertMinutes); err != nil {
			tb.Fatalf("generate attribution_minutes: %v", err)
		}
	}
	end := f.End().UnixNano()
	if f.Open {
		end = 0
	}
	allocs := tables.Insert(tables.Allocations, tables.AllocationColumns) + fmt.Sprintf(`
SELECT concat('a', toString(inst)), concat('tenant-', toString(inst %% 10)), 'pro', concat('node-', toString(intDiv(inst, 56))),
    concat('gpu', toString(intDiv(inst, 7) %% 8), '/mig', toString(inst %% 7)), toInt64(%d), toInt64(%d), toInt64(%d), toUInt64(1), toUInt8(0), now()
FROM (SELECT number AS inst FROM system.numbers LIMIT %d)`, start, start, end, f.Instances)
	if err := conn.Exec(ctx, allocs); err != nil {
		tb.Fatalf("generate allocations: %v", err)
	}
	f.Took = time.Since(began)
	rows := 0
	if !f.NoSeconds {
		rows = f.Instances * (f.Seconds - f.tail())
	}
	tb.Logf("fleet: %d instances × %d s: %d samples_1s rows (from second %d), raw %v (%d rows), samples_1m %v (%d rows), attribution_minutes %v, generated in %s (%.2f M samples_1s rows/s)",
		f.Instances, f.Seconds, rows, f.tail(), f.Raw, f.Instances*(f.Seconds-f.tail())*10, f.Minutes, f.Instances*(f.Seconds/60), f.Stored, f.Took.Round(time.Millisecond), float64(rows)/f.Took.Seconds()/1e6)
}

// generate runs an INSERT … SELECT of the steps [from, steps) (seconds, minutes or ticks) for
// every instance, a slice of the steps at a time with every instance, in time order, as the
// collector writes them (so that each part holds a stretch of time, as in production). In query,
// {{first}} is the slice's first step and {{rows}} its rows: the step is
// "{{first}} + intDiv(number, instances)", the instance "number % instances".
func (f *BenchFleet) generate(tb testing.TB, conn driver.Conn, what, query string, from, steps int) {
	tb.Helper()
	per := max(1, benchSliceRows/f.Instances)
	for first := from; first < steps; first += per {
		n := min(per, steps-first)
		q := strings.NewReplacer("{{first}}", strconv.Itoa(first), "{{rows}}", strconv.Itoa(n*f.Instances)).Replace(query)
		if err := conn.Exec(context.Background(), q); err != nil {
			tb.Fatalf("generate %s (steps %d to %d): %v", what, first, first+n, err)
		}
	}
}

// TimedConn is a connection that times each query it runs, to its last row, by the query's
// text from its first FROM, and has ClickHouse log them (log_queries) under IDs of its own, for
// what they read: SLICEMETER_BENCH_QUERIES=1 makes Log log, per query, the time and the rows
// and bytes read (where a minute's time goes, and the figures that a loaded machine does not
// change). Everything but Query goes to the connection untimed.
type TimedConn struct {
	driver.Conn
	mu    sync.Mutex
	total map[string]time.Duration
	count map[string]int
	names map[string]string // query ID → name
}

// NewTimedConn times conn's queries.
func NewTimedConn(conn driver.Conn) *TimedConn {
	return &TimedConn{Conn: conn, total: map[string]time.Duration{}, count: map[string]int{}, names: map[string]string{}}
}

// Query runs the query, timed and logged by ClickHouse under an ID of its own.
func (q *TimedConn) Query(ctx context.Context, query string, args ...any) (driver.Rows, error) {
	name := queryName(query)
	q.mu.Lock()
	id := fmt.Sprintf("bench-%p-%d", q, len(q.names))
	q.names[id] = name
	q.mu.Unlock()
	// The chunks' queries raise max_query_size (store's chunkContext): these settings replace theirs.
	ctx = clickhouse.Context(ctx, clickhouse.WithQueryID(id), clickhouse.WithSettings(clickhouse.Settings{"log_queries": 1, "max_query_size": 128 << 20}))
	began := time.Now()
	rows, err := q.Conn.Query(ctx, query, args...)
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

// Log logs, with SLICEMETER_BENCH_QUERIES=1, each query's time, and the rows and bytes that
// ClickHouse read for it, per op (n ops), under prefix; it returns the rows read per op.
func (q *TimedConn) Log(b *testing.B, prefix string, n int) float64 {
	b.Helper()
	if os.Getenv("SLICEMETER_BENCH_QUERIES") != "1" {
		return 0
	}
	ctx := context.Background()
	if err := q.Conn.Exec(ctx, "SYSTEM FLUSH LOGS"); err != nil {
		b.Fatal(err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	read := map[string][2]uint64{}
	rows, err := q.Conn.Query(ctx, `SELECT query_id, read_rows, read_bytes FROM system.query_log WHERE type = 2 AND query_id LIKE ?`, fmt.Sprintf("bench-%p-%%", q))
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
	q     *TimedConn
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
