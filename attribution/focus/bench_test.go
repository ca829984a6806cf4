package focus_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/focus"
	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/stored"
)

// BenchmarkFOCUS exports February 2026 (28 days) of SLICEMETER_BENCH_INSTANCES MIG 1g.5gb
// instances (default 56), one allocation each for the whole month, ten tenants, from the
// stored minutes as the attribution service stores them (the rows of attribution/period's
// BenchmarkPeriod, with the instance's model, profile and fraction), as a closed period's
// files are written: one Usage row per allocation per hour, CSV, Parquet, or both in one
// pass (MonthlyExport.Month). It reports the rows, each file's bytes, and the process's peak
// RSS (VmHWM) after each.
//
// The scale, 1000 instances (40.3M stored rows):
//
//	SLICEMETER_BENCH_INSTANCES=1000 go test -run '^$' -bench FOCUS -benchtime 1x -timeout 60m ./attribution/focus/
func BenchmarkFOCUS(b *testing.B) {
	instances := 56
	if v, err := strconv.Atoi(os.Getenv("SLICEMETER_BENCH_INSTANCES")); err == nil && v > 0 {
		instances = v
	}
	ctx := context.Background()
	conn := chtest.NewDatabase(b, nil)
	start := time.Date(2026, time.February, 1, 0, 0, 0, 0, time.UTC)
	end := time.Date(2026, time.March, 1, 0, 0, 0, 0, time.UTC)
	minutes := int(end.Sub(start) / time.Minute)
	began := time.Now()
	insertMinutes := fmt.Sprintf(`INSERT INTO attribution_minutes (minute, tenant, allocation_id, tier, node, instance_id,
    requested_ns, started_ns, sliced, billed_ns, metered_ns, active_ns, list_cost, cost, waste_cost, overhead_cost, efficiency_ns,
    overhead_ns, cold_start_ns, cold_start_sla_ns, wait_ns, wait_count, currency, computed_ns, model, profile, fraction)
SELECT toDateTime(%d + m * 60), if(inst < %d, concat('tenant-', toString(inst %% 10)), '__unallocated__'),
    if(inst < %d, concat('a', toString(inst)), ''), 'pro', if(inst < %d, concat('node-', toString(intDiv(inst, 7))), ''),
    if(inst < %d, concat('gpu0/mig', toString(inst %% 7)), ''), toInt64(%d), toInt64(%d), toUInt8(0),
    toInt64(60000000000), toInt64(60000000000), toInt64(60000000000), 1.6 / 7 / 60, 1.6 / 7 / 60, 0.01, 0.002, 27e9,
    0.0926 * 60e9, toInt64(0), toInt64(30000000000), emptyArrayUInt64(), emptyArrayUInt64(), 'USD', toUInt64(1),
    if(inst < %d, 'A100-SXM4-40GB', ''), if(inst < %d, '1g.5gb', ''), if(inst < %d, 1 / 7, 0)
FROM (SELECT number %% %d AS m, intDiv(number, %d) AS inst FROM system.numbers LIMIT ? OFFSET ?)`,
		start.Unix(), instances, instances, instances, instances, start.UnixNano(), start.UnixNano(),
		instances, instances, instances, minutes, minutes)
	// By blocks of instances: one INSERT of the whole month can outlast the driver's read
	// timeout on loaded cores.
	const block = 100
	for first := 0; first <= instances; first += block {
		if err := conn.Exec(ctx, insertMinutes, min(block, instances+1-first)*minutes, first*minutes); err != nil {
			b.Fatalf("generate attribution_minutes of instances %d-: %v", first, err)
		}
	}
	b.Logf("%d instances × %d minutes: %d stored rows, generated in %s", instances, minutes, (instances+1)*minutes, time.Since(began).Round(time.Millisecond))
	// The attribution service rolls up every hour after storing its minutes (stored.RollupHours).
	began = time.Now()
	if err := stored.RollupHours(ctx, conn, start, end); err != nil {
		b.Fatalf("roll up the stored minutes by hour: %v", err)
	}
	b.Logf("rolled up by hour in %s", time.Since(began).Round(time.Millisecond))
	book := chtest.Book()
	e := focus.ForAttribution(conn, book, attribution.Options{FromMinutes: true, Now: end.Add(72 * time.Hour)}, nil)
	p := focus.PeriodOf(start, book.Zone())
	wantRows := instances * minutes / 60
	for _, f := range []focus.Format{focus.CSV, focus.Parquet, "both"} {
		b.Run(string(f), func(b *testing.B) {
			dir := b.TempDir()
			var tot focus.Totals
			m := startMeasure(ctx, b)
			ctx := m.ctx
			for b.Loop() {
				var err error
				if f == "both" {
					tot, err = (&focus.MonthlyExport{Dir: dir, Issuer: "bench"}).Month(ctx, e, p, report.Report{})
				} else {
					tot, err = exportFile(ctx, e, p, filepath.Join(dir, "focus."+string(f)), f)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			if tot.Rows != wantRows {
				b.Fatalf("%d rows, want %d", tot.Rows, wantRows)
			}
			b.ReportMetric(float64(tot.Rows), "rows")
			files, _ := filepath.Glob(filepath.Join(dir, "*"))
			for _, file := range files {
				if st, err := os.Stat(file); err == nil && !strings.HasSuffix(file, ".json") {
					b.ReportMetric(float64(st.Size()), filepath.Ext(file)[1:]+"-bytes")
				}
			}
			b.ReportMetric(peakRSS(b), "peak-RSS-MiB")
			m.report(b, conn)
		})
	}
}

func exportFile(ctx context.Context, e focus.Export, p focus.Period, path string, f focus.Format) (focus.Totals, error) {
	out, err := os.Create(path)
	if err != nil {
		return focus.Totals{}, err
	}
	defer out.Close()
	w, err := focus.NewWriter(out, f)
	if err != nil {
		return focus.Totals{}, err
	}
	tot, err := e.Usage(ctx, p.Start, p.End, w)
	if err != nil {
		return tot, err
	}
	return tot, w.Close()
}

// peakRSS is the process's peak resident set (VmHWM), in MiB.
func peakRSS(b *testing.B) float64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb / 1024
		}
	}
	b.Fatal("no VmHWM in /proc/self/status")
	return 0
}

// measure splits an export's time between the Go process (its CPU time) and ClickHouse (the
// queries' durations and CPU time in system.query_log, logged for the export's queries only),
// which wall time on shared cores cannot. A query's duration includes the time the client
// takes to read its rows.
type measure struct {
	ctx        context.Context
	began      time.Time
	cpu        time.Duration
	rows, read uint64 // rows and bytes the server read, from the queries' progress
}

func startMeasure(ctx context.Context, b *testing.B) *measure {
	m := &measure{began: time.Now().Truncate(time.Second), cpu: cpuTime(b)}
	m.ctx = clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"log_queries": 1}),
		clickhouse.WithProgress(func(p *clickhouse.Progress) { m.rows += p.Rows; m.read += p.Bytes }))
	return m
}

func (m *measure) report(b *testing.B, conn driver.Conn) {
	b.ReportMetric((cpuTime(b)-m.cpu).Seconds()/float64(b.N), "go-cpu-s")
	b.ReportMetric(float64(m.rows)/float64(b.N), "ch-read-rows")
	ctx := context.Background()
	if err := conn.Exec(ctx, "SYSTEM FLUSH LOGS"); err != nil {
		b.Logf("no query log: %v", err)
		return
	}
	rows, err := conn.Query(ctx, `SELECT substring(replaceRegexpAll(query, '\\s+', ' '), 1, 90) AS q, count(), sum(query_duration_ms), sum(read_rows), sum(result_rows)
FROM system.query_log
WHERE type = 2 AND event_time >= toDateTime(?) AND query NOT LIKE '%query_log%'
GROUP BY q ORDER BY sum(query_duration_ms) DESC`, m.began.Unix())
	if err != nil {
		b.Logf("no query log: %v", err)
		return
	}
	defer rows.Close()
	var total uint64
	for rows.Next() {
		var (
			q                     string
			n, ms, read, returned uint64
		)
		if err := rows.Scan(&q, &n, &ms, &read, &returned); err != nil {
			b.Fatal(err)
		}
		total += ms
		b.Logf("%6d ms %4d× read %9d rows, returned %8d: %s", ms, n, read, returned, q)
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(total)/1e3/float64(b.N), "ch-query-s")
	// The server's CPU time, where its query log has the queries' profile events.
	var cpu uint64
	err = conn.QueryRow(ctx, `SELECT sum(arraySum(arrayMap((n, v) -> if(n = 'UserTimeMicroseconds' OR n = 'SystemTimeMicroseconds', v, 0),
    ProfileEvents.Names, ProfileEvents.Values)))
FROM system.query_log
WHERE type = 2 AND event_time >= toDateTime(?) AND query NOT LIKE '%query_log%'`, m.began.Unix()).Scan(&cpu)
	if err != nil {
		b.Logf("no CPU time in the query log: %v", err)
		return
	}
	b.ReportMetric(float64(cpu)/1e6/float64(b.N), "ch-cpu-s")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		b.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
