package statement

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/period"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/stored"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
)

func TestMain(m *testing.M) { localtest.Main(m) }

var february = period.Month{Year: 2026, Month: time.February}

// storeMinutes writes what the attribution service stores for allocs allocations of tenant
// acme, allocation i from day i%20 of February for 3 + i%9 days (at most to the month's end),
// a 1g.5gb slice of an A100 at pro, 90 % efficient, one cold start of 20 + i%20 s each, plus
// the unallocated row of every minute.
func storeMinutes(t testing.TB, conn driver.Conn, allocs int) {
	t.Helper()
	start, end := february.Bounds(time.UTC)
	minutes := int(end.Sub(start) / time.Minute)
	perMinute := 1.6 / 7 / 60
	q := fmt.Sprintf(`INSERT INTO attribution_minutes (minute, tenant, allocation_id, tier, node, instance_id,
    requested_ns, started_ns, sliced, billed_ns, metered_ns, list_cost, cost, waste_cost, overhead_cost, efficiency_ns,
    cold_start_ns, cold_start_sla_ns, wait_ns, wait_count, currency, computed_ns)
SELECT toDateTime(%[1]d + m * 60), if(a < %[2]d, 'acme', '__unallocated__'), if(a < %[2]d, concat('a', toString(a)), ''), 'pro',
    if(a < %[2]d, concat('node-', toString(a %% 7)), ''), if(a < %[2]d, concat('GPU-', toString(a)), ''),
    toInt64(%[1]d + (a %% 20) * 86400) * 1000000000, toInt64(%[1]d + (a %% 20) * 86400 + 20 + a %% 20) * 1000000000, toUInt8(0),
    toInt64(60000000000), toInt64(60000000000), %[3]g, %[3]g, if(a < %[2]d, %[3]g * 0.1, 0), if(a < %[2]d, %[3]g * 0.02, 0),
    toInt64(54000000000), if(m = (a %% 20) * 1440, toInt64(20 + a %% 20) * 1000000000, toInt64(0)), toInt64(30000000000),
    emptyArrayUInt64(), emptyArrayUInt64(), 'USD', toUInt64(1)
FROM (SELECT number %% %[4]d AS m, intDiv(number, %[4]d) AS a FROM system.numbers LIMIT %[5]d)
WHERE a = %[2]d OR (m >= (a %% 20) * 1440 AND m < least((a %% 20 + 3 + a %% 9) * 1440, %[4]d))`,
		start.Unix(), allocs, perMinute, minutes, (allocs+1)*minutes)
	if err := conn.Exec(context.Background(), q); err != nil {
		t.Fatalf("store the minutes: %v", err)
	}
}

// TestStatementFromClickHouse: the statement of a month from the stored minutes, open and
// then closed: the same totals as the report of the month, a day per chart point, a line
// per allocation; closed, the close's version and what it billed.
func TestStatementFromClickHouse(t *testing.T) {
	ctx := context.Background()
	conn := chtest.NewDatabase(t, nil)
	storeMinutes(t, conn, 5)
	book := chtest.Book()
	src := DatabaseSource(conn, book, true, func(context.Context, report.Report) {})
	start, end := february.Bounds(time.UTC)
	res, err := attribution.Report(ctx, conn, book, attribution.Options{From: start, To: end, FromMinutes: true})
	if err != nil {
		t.Fatal(err)
	}
	var want Totals
	for _, r := range res.Report.Only("acme").Tenants {
		want.add(r)
	}
	if want.Cost <= 0 {
		t.Fatalf("the month's report bills acme nothing: %+v", res.Report)
	}
	check := func(st *Statement, status string) {
		t.Helper()
		if !close(st.Totals.Cost, want.Cost) || !close(st.Totals.ListCost, want.ListCost) || !close(st.Totals.WasteCost, want.WasteCost) {
			t.Errorf("%s: totals %+v, the report's %+v", status, st.Totals, want)
		}
		if len(st.Days) != 28 || len(st.Allocations) != 5 {
			t.Errorf("%s: %d days, %d line items; want 28 and 5", status, len(st.Days), len(st.Allocations))
		}
		var b bytes.Buffer
		if err := Render(&b, st); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), `id="status">`+status) || !strings.Contains(b.String(), `data-total="cost">`+money(want.Cost)+"<") {
			t.Errorf("the page is not %s or lacks cost %s", status, money(want.Cost))
		}
	}
	st, err := Build(ctx, src, "acme", february, now)
	if err != nil {
		t.Fatal(err)
	}
	if st.Closed != nil {
		t.Fatal("February is closed before its close")
	}
	check(st, "open")
	if _, err := (period.Closer{Conn: conn, Book: book, Options: attribution.Options{FromMinutes: true}}).Close(ctx, february, end.Add(72*time.Hour)); err != nil {
		t.Fatal(err)
	}
	st, err = Build(ctx, src, "acme", february, now)
	if err != nil {
		t.Fatal(err)
	}
	if st.Closed == nil || st.Closed.Version != 1 {
		t.Fatalf("February after its close: %+v", st.Closed)
	}
	check(st, "closed, version 1")
}

// BenchmarkStatement renders a statement of a month for a tenant with
// SLICEMETER_BENCH_ALLOCATIONS allocations (default 100):
//
//   - render: the page alone, from a built statement;
//
//   - clickhouse: built from the stored minutes (the API's way: the month with its line
//     items and each day's report) and rendered.
//
//     go test -run '^$' -bench Statement -benchtime 3x ./attribution/statement/
func BenchmarkStatement(b *testing.B) {
	allocs := 100
	if v, err := strconv.Atoi(os.Getenv("SLICEMETER_BENCH_ALLOCATIONS")); err == nil && v > 0 {
		allocs = v
	}
	ctx := context.Background()
	b.Run("render", func(b *testing.B) {
		f := newFixture(allocs)
		st, err := Build(ctx, f.source(), "acme", november, now)
		if err != nil {
			b.Fatal(err)
		}
		var buf bytes.Buffer
		for b.Loop() {
			buf.Reset()
			if err := Render(&buf, st); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(buf.Len()), "page-bytes")
	})
	b.Run("clickhouse", func(b *testing.B) {
		conn := chtest.NewDatabase(b, nil)
		storeMinutes(b, conn, allocs)
		// As the attribution service stores them: each hour rolled up after its minutes.
		start, end := february.Bounds(time.UTC)
		if err := stored.RollupHours(ctx, conn, start, end); err != nil {
			b.Fatal(err)
		}
		src := DatabaseSource(conn, chtest.Book(), true, func(context.Context, report.Report) {})
		var buf bytes.Buffer
		began := cpuTime(b)
		for b.Loop() {
			st, err := Build(ctx, src, "acme", february, now)
			if err != nil {
				b.Fatal(err)
			}
			if len(st.Allocations) != allocs {
				b.Fatalf("%d line items, want %d", len(st.Allocations), allocs)
			}
			buf.Reset()
			if err := Render(&buf, st); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(buf.Len()), "page-bytes")
		b.ReportMetric((cpuTime(b)-began).Seconds()/float64(b.N), "go-cpu-s")
	})
}

// cpuTime is the process's user and system CPU time so far: on shared cores a wall time
// says little on its own.
func cpuTime(b *testing.B) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		b.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
