package stored_test

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/stored"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
)

// TestHoursAreTheMinutes: random stored minutes over 3 h 25 min, with recomputed minutes (an
// allocation dropped, other amounts), a batch stored twice and minutes missing, are written
// to two databases alike; one is rolled up by hour at some steps, the other never. Every
// reader of stored minutes (the report and its lines, the hourly lines, the fleet's held
// instances and tenants per host) gives the same figures (to 1e-9) from both, for windows
// with and without partial hours, before and after a roll-up, and while a recomputed hour's
// roll-up is stale. A third database, rolled up then given a row only its roll-up holds, shows
// that the fresh hours are read from the roll-up.
func TestHoursAreTheMinutes(t *testing.T) {
	if testing.Short() {
		t.Skip("writes stored minutes into ClickHouse")
	}
	ctx := context.Background()
	db := func(suffix string) driver.Conn {
		return localtest.Database(t, localtest.DatabaseOptions{Name: localtest.DatabaseName(t) + suffix}).Conn
	}
	plain, rolled, marked := db("_plain"), db("_rolled"), db("_marked")
	start := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	end := start.Add(3*time.Hour + 25*time.Minute)
	r := rand.New(rand.NewPCG(3, 1))
	requested := start.Add(-time.Hour)
	pass := start.Add(5 * time.Hour)
	write := func(minutes []stored.Minute) {
		t.Helper()
		pass = pass.Add(time.Second)
		for _, conn := range []driver.Conn{plain, rolled, marked} {
			if err := stored.WriteMinutes(ctx, conn, minutes, pass); err != nil {
				t.Fatal(err)
			}
		}
	}
	var all []stored.Minute
	for m := start; m.Before(end); m = m.Add(time.Minute) {
		if m.Equal(start.Add(2*time.Hour + 10*time.Minute)) {
			continue // not attributed yet: its hour is incomplete
		}
		all = append(all, chtest.RandomMinute(r, m, requested, 6))
	}
	write(all[:100])
	write(all[100:])
	write(all[40:70]) // a batch sent twice
	check := func(step string) {
		t.Helper()
		for _, w := range [][2]time.Time{
			{start, end}, {start, start.Add(2 * time.Hour)}, {start.Add(7 * time.Minute), end.Add(-3 * time.Minute)},
			{start.Add(time.Hour), start.Add(2 * time.Hour)}, {start.Add(59 * time.Minute), start.Add(3*time.Hour + time.Minute)},
		} {
			want, got := readAll(ctx, t, plain, w[0], w[1]), readAll(ctx, t, rolled, w[0], w[1])
			if d := chtest.Differences("", want, got); len(d) > 0 {
				t.Errorf("%s, [%s, %s): rolled up ≠ minutes: %v", step, w[0].Format(time.Kitchen), w[1].Format(time.Kitchen), d[:min(len(d), 8)])
			}
		}
	}
	check("no roll-up")
	for _, conn := range []driver.Conn{rolled, marked} {
		if err := stored.RollupHours(ctx, conn, start, end); err != nil {
			t.Fatal(err)
		}
	}
	check("rolled up")
	// Recomputed minutes of the first two hours: the second hour drops an allocation.
	var again []stored.Minute
	for _, m := range all[30:95] {
		n := chtest.RandomMinute(r, m.Start, requested, 6)
		if m.Start.Hour() == 1 {
			n.Lines = n.Lines[1:]
		}
		again = append(again, n)
	}
	write(again)
	check("recomputed, roll-up stale")
	if err := stored.RollupHours(ctx, rolled, again[0].Start, again[len(again)-1].Start.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	check("recomputed, rolled up again")

	// A row only the roll-up of 01:00 holds: a report of the fresh hour 01:00 bills it, one
	// of the stale hour 00:00 (recomputed, not rolled up again in marked) does not.
	ghost := `INSERT INTO attribution_hours (hour, tenant, allocation_id, list_cost, cost, minutes, source_ns, source_minutes, currency, model)
SELECT hour, 'ghost', 'g1', 1, 1, 60, source_ns, source_minutes, 'USD', 'A100-SXM4-40GB' FROM attribution_hours WHERE hour = toDateTime(?)
ORDER BY source_ns DESC LIMIT 1`
	if err := stored.RollupHours(ctx, marked, start.Add(time.Hour), start.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	for _, h := range []time.Time{start, start.Add(time.Hour)} {
		if err := marked.Exec(ctx, ghost, h.Unix()); err != nil {
			t.Fatal(err)
		}
		rep, err := stored.FromMinutes(ctx, marked, h, h.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		billed := slices.ContainsFunc(rep.Tenants, func(r report.Row) bool { return r.Tenant == "ghost" })
		if fresh := h.Hour() == 1; billed != fresh {
			t.Errorf("hour %s: ghost billed %v, want %v (read from its roll-up only when fresh)", h.Format(time.Kitchen), billed, fresh)
		}
	}
}

// readings are what every reader of stored minutes gives for a window.
type readings struct {
	Report  report.Report
	Lines   []billing.Line
	Hourly  map[string][]billing.Line
	Held    []stored.Held
	PerHost map[string]int
}

func readAll(ctx context.Context, t *testing.T, conn driver.Conn, from, to time.Time) readings {
	t.Helper()
	var out readings
	byLine := func(a, b billing.Line) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.AllocationID, b.AllocationID))
	}
	rep, lines, err := stored.FromMinutesLines(ctx, conn, from, to)
	if err == nil {
		slices.SortFunc(rep.Tenants, func(a, b report.Row) int { return cmp.Compare(a.Tenant, b.Tenant) })
		slices.SortFunc(lines, byLine)
		out.Report, out.Lines = rep, lines
	} else {
		out.Report.Notes = []string{err.Error()} // not attributed: both must say so alike
	}
	if from.Truncate(time.Hour).Equal(from) && to.Truncate(time.Hour).Equal(to) {
		out.Hourly = map[string][]billing.Line{}
		err := stored.HourlyLines(ctx, conn, from, to, func(hour time.Time, lines []billing.Line) error {
			l := slices.Clone(lines)
			slices.SortFunc(l, byLine)
			out.Hourly[hour.Format(time.RFC3339)] = l
			return nil
		})
		if err != nil {
			out.Hourly["error"] = []billing.Line{{Tenant: err.Error()}}
		}
	}
	if out.Held, err = stored.HeldInstances(ctx, conn, from, to); err != nil {
		t.Fatal(err)
	}
	if out.PerHost, err = stored.TenantsPerHost(ctx, conn, from, to); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestHoursQueriesCurrentDialect runs every query of the hourly roll-up and of its readers, as
// sent, values bound, through chDB (current ClickHouse) after the migrations, as on 18.16.
func TestHoursQueriesCurrentDialect(t *testing.T) {
	ctx := context.Background()
	recorder := &chtest.QueryRecorder{}
	conn := chtest.NewDatabase(t, slog.New(recorder))
	start := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	chtest.WriteRandomMinutes(ctx, t, conn, 4, start, 65)
	before := len(recorder.All())
	if err := stored.RollupHours(ctx, conn, start, start.Add(65*time.Minute)); err != nil {
		t.Fatal(err)
	}
	_ = readAll(ctx, t, conn, start, start.Add(time.Hour))
	got := readAll(ctx, t, conn, start, start.Add(65*time.Minute))
	if got.Report.Notes != nil || len(got.Held) == 0 || len(got.PerHost) == 0 {
		t.Fatalf("read %+v: want a report, held instances and tenants per host", got)
	}
	// The hour from its roll-up's markers, the 5 minutes after it from theirs; 5 more not stored.
	if err := stored.CheckAttributed(ctx, conn, start, start.Add(70*time.Minute)); !errors.Is(err, stored.ErrNotAttributed) ||
		!strings.Contains(err.Error(), "5 of its 70 minutes are not attributed yet, the first 2026-03-02T01:05:00Z") {
		t.Errorf("the 70 minutes of which 65 are stored: %v", err)
	}
	queries := recorder.QueriesSince(before)
	if len(queries) < 8 {
		t.Fatalf("recorded %d queries, want the roll-up's and the readers': %q", len(queries), queries)
	}
	localtest.CheckQueriesWithChDB(t, "hours.sql", queries)
}
