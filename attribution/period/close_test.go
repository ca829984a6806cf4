package period_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/shopspring/decimal"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/allocations"
	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/period"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/stored"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/schemas/allocation"
	"github.com/slicemeter/slicemeter/schemas/audit"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

func TestMain(m *testing.M) { localtest.Main(m) }

var (
	feb = period.Month{Year: 2026, Month: time.February}
	mar = period.Month{Year: 2026, Month: time.March}
	apr = period.Month{Year: 2026, Month: time.April}
)

// sampleMonths writes a sample a minute of the whole A100 and the MIG instance of node-a over
// [from, to).
func sampleMonths(t *testing.T, conn driver.Conn, from, to time.Time) {
	t.Helper()
	var samples []*pb.Sample
	for at := from; at.Before(to); at = at.Add(time.Minute) {
		off := at.Sub(chtest.T0)
		samples = append(samples, chtest.WholeA100.Sample(off, time.Minute, true, 0.5), chtest.MigA100.Sample(off, time.Minute, true, 0.25))
	}
	chtest.InsertSamples(t, conn, "node-a", samples)
}

func day(m time.Month, d int) time.Time { return time.Date(2026, m, d, 0, 0, 0, 0, time.UTC) }

// TestCloseFreezesAndCorrects closes February, posts an allocation for it late (as the API
// does), and closes March: February reads back byte-identical, March carries the difference
// as correction lines, and what all periods billed for February is its recomputed bill.
func TestCloseFreezesAndCorrects(t *testing.T) {
	ctx := context.Background()
	conn := chtest.NewDatabase(t, nil)
	sampleMonths(t, conn, day(time.February, 1), day(time.April, 1))
	chtest.InsertAllocations(t, conn, []chtest.AllocationRow{
		{ID: "a1", Tenant: "acme", Tier: "pro", Node: "node-a", Instance: chtest.WholeA100.ID, Requested: day(time.February, 3), Started: day(time.February, 3), Ended: day(time.February, 10), Version: 1},
		{ID: "a2", Tenant: "acme", Tier: "pro", Node: "node-a", Instance: chtest.WholeA100.ID, Requested: day(time.March, 2), Started: day(time.March, 2), Ended: day(time.March, 4), Version: 1},
	})
	closer := period.Closer{Conn: conn, Book: chtest.Book()}
	now := day(time.April, 5)

	if _, err := closer.Close(ctx, apr, now); !errors.Is(err, period.ErrNotOver) {
		t.Errorf("closing April on April 5: %v, want ErrNotOver", err)
	}
	closedFeb, err := closer.Close(ctx, feb, now)
	if err != nil {
		t.Fatal(err)
	}
	if closedFeb.Version != period.Version || !closedFeb.ClosedAt.Equal(now) || closedFeb.Timezone != "UTC" ||
		!closedFeb.Start.Equal(day(time.February, 1)) || !closedFeb.End.Equal(day(time.March, 1)) {
		t.Errorf("closed February: %+v", closedFeb)
	}
	// acme: 7 days of a whole A100 at 1.60/h.
	if want := decimal.RequireFromString("268.8"); !closedFeb.Cost.Equal(want) || !closedFeb.ListCost.Equal(want) {
		t.Errorf("February's totals: cost %s, list %s; want %s", closedFeb.Cost, closedFeb.ListCost, want)
	}
	if !closedFeb.CorrectionCost.IsZero() {
		t.Errorf("February corrects nothing, has %s", closedFeb.CorrectionCost)
	}
	// The stored report is the one attribution.Report gives for the month, rendered.
	res, err := attribution.Report(ctx, conn, chtest.Book(), attribution.Options{From: closedFeb.Start, To: closedFeb.End, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := res.Report.WriteCSV(&want); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(closedFeb.Report, want.Bytes()) {
		t.Errorf("closed February's report:\n%s\nwant:\n%s", closedFeb.Report, want.Bytes())
	}
	if _, err := closer.Close(ctx, feb, now.Add(time.Hour)); !errors.Is(err, period.ErrClosed) {
		t.Errorf("closing February again: %v, want ErrClosed", err)
	}
	if _, err := closer.Close(ctx, period.Month{Year: 2026, Month: time.January}, now); !errors.Is(err, period.ErrOutOfOrder) {
		t.Errorf("closing January after February: %v, want ErrOutOfOrder", err)
	}

	// Late: an allocation of February posted in April, as POST /api/v1/allocations stores it.
	allocStore := allocations.NewStore(conn)
	if _, err := allocStore.Put(ctx, audit.Actor{Door: audit.DoorImport, Principal: "test"}, []allocation.Allocation{{ID: "late", Tenant: "beta", Tier: "budget", Node: "node-a", Instance: chtest.MigA100.ID,
		RequestedAt: day(time.February, 20), StartedAt: day(time.February, 20), EndedAt: day(time.February, 21)}}); err != nil {
		t.Fatal(err)
	}
	again, ok, err := period.Get(ctx, conn, feb)
	if err != nil || !ok {
		t.Fatalf("read February back: %v, %v", ok, err)
	}
	if !bytes.Equal(again.Report, closedFeb.Report) {
		t.Errorf("February changed after a late allocation:\n%s\nwas:\n%s", again.Report, closedFeb.Report)
	}

	closedMar, err := closer.Close(ctx, mar, now)
	if err != nil {
		t.Fatal(err)
	}
	csv := string(closedMar.Report)
	t.Logf("March, closed:\n%s", csv)
	// beta's day of a 1g.5gb (1/7 of 1.60/h) at 0.7: list 5.485714, cost 3.84; unallocated
	// shrinks by the list cost.
	for _, line := range []string{
		"beta,correction:2026-02,2026-03-01T00:00:00Z,2026-04-01T00:00:00Z,86400.000,5.485714,3.840000,",
		"__unallocated__,correction:2026-02,2026-03-01T00:00:00Z,2026-04-01T00:00:00Z,,-5.485714,,,,,,,,,USD",
	} {
		if !strings.Contains(csv, line+"") {
			t.Errorf("March's report lacks the correction %q:\n%s", line, csv)
		}
	}
	if strings.Count(csv, "correction:") != 2 {
		t.Errorf("March's report: want exactly 2 correction lines:\n%s", csv)
	}
	if want := decimal.RequireFromString("3.84"); !closedMar.CorrectionCost.Sub(want).Abs().LessThan(period.Tolerance) {
		t.Errorf("March's correction cost %s, want %s", closedMar.CorrectionCost, want)
	}
	// Σ over the periods: what February and its corrections billed is February recomputed.
	checkBilled(t, conn, feb, now)
	lines, err := period.Lines(ctx, conn, mar)
	if err != nil {
		t.Fatal(err)
	}
	var corrections []string
	for _, l := range lines {
		if l.Corrects != "" {
			corrections = append(corrections, fmt.Sprintf("%s %s/%s %s", l.Corrects, l.Tenant, l.Tier, l.Cost.StringFixed(6)))
		}
	}
	if got := strings.Join(corrections, "; "); got != "2026-02 __unallocated__/ 0.000000; 2026-02 beta/budget 3.840000" {
		t.Errorf("March's correction lines: %s", got)
	}

	// Nothing new: April's close corrects nothing (corrections are not billed twice).
	closedApr, err := closer.Close(ctx, apr, day(time.May, 2))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(closedApr.Report), "correction:") {
		t.Errorf("April corrects again:\n%s", closedApr.Report)
	}
	checkBilled(t, conn, feb, now)
	checkBilled(t, conn, mar, now)

	list, err := period.List(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range list {
		names = append(names, p.Period.String())
	}
	if strings.Join(names, " ") != "2026-02 2026-03 2026-04" {
		t.Errorf("List: %v", names)
	}
}

// checkBilled compares, per tenant and tier, what the closed periods billed for m with m's
// report recomputed now: equal to the Decimal places stored (Tolerance).
func checkBilled(t *testing.T, conn driver.Conn, m period.Month, now time.Time) {
	t.Helper()
	ctx := context.Background()
	start, end := m.Bounds(time.UTC)
	res, err := attribution.Report(ctx, conn, chtest.Book(), attribution.Options{From: start, To: end, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	billed, err := period.Billed(ctx, conn, m)
	if err != nil {
		t.Fatal(err)
	}
	rows := res.Report.Rows()
	if len(billed) != len(rows) {
		t.Errorf("%s: %d tenant/tier lines billed, the report has %d rows", m, len(billed), len(rows))
	}
	for _, row := range rows {
		got := billed[period.Key(row.Tenant, row.Tier)]
		cost, list := decimal.NewFromFloat(row.Cost), decimal.NewFromFloat(row.ListCost)
		if got.Cost.Sub(cost).Abs().GreaterThan(period.Tolerance) || got.ListCost.Sub(list).Abs().GreaterThan(period.Tolerance) || got.Allocated != row.Allocated {
			t.Errorf("%s %s/%s: billed %s (list %s, %s) over the periods; recomputed %s (list %s, %s)",
				m, row.Tenant, row.Tier, got.Cost, got.ListCost, got.Allocated, cost, list, row.Allocated)
		}
	}
}

// TestPeriodQueriesCurrentDialect runs the queries of a close, a read-back and the corrections,
// as sent (values bound), through chDB (current ClickHouse) after the migrations.
func TestPeriodQueriesCurrentDialect(t *testing.T) {
	recorder := &chtest.QueryRecorder{}
	conn := chtest.NewDatabase(t, slog.New(recorder))
	ctx := context.Background()
	sampleMonths(t, conn, day(time.February, 27), day(time.March, 2))
	closer := period.Closer{Conn: conn, Book: chtest.Book()}
	for _, m := range []period.Month{feb, mar} {
		if _, err := closer.Close(ctx, m, day(time.April, 5)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := period.List(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if _, err := period.Lines(ctx, conn, mar); err != nil {
		t.Fatal(err)
	}
	var queries []string
	for _, q := range recorder.All() {
		if strings.Contains(q, "billing_period") && !strings.HasPrefix(q, "INSERT") {
			queries = append(queries, q)
		}
	}
	if len(queries) < 3 {
		t.Fatalf("recorded %d period queries: %q", len(queries), queries)
	}
	localtest.CheckQueriesWithChDB(t, "period.sql", queries)
}

// TestCloseDue closes what is due, in order, at successive moments.
func TestCloseDue(t *testing.T) {
	ctx := context.Background()
	conn := chtest.NewDatabase(t, nil)
	closer := period.Closer{Conn: conn, Book: chtest.Book()}
	tests := []struct {
		now  time.Time
		want string // the periods closed at now
	}{
		{day(time.March, 3), "2026-01"},                 // none closed: the latest due (February ended 48 h ago)
		{day(time.March, 4), "2026-02"},                 // 72 h
		{day(time.March, 20), ""},                       // nothing more due
		{day(time.June, 10), "2026-03 2026-04 2026-05"}, // the service was away: in order
		{day(time.June, 10).Add(time.Hour), ""},         // once
		{day(time.July, 3).Add(23 * time.Hour), ""},     // June ended 71 h ago
		{day(time.July, 4).Add(time.Nanosecond), "2026-06"},
	}
	for _, tt := range tests {
		got, err := period.CloseDue(ctx, closer, period.DefaultCloseAfter, tt.now)
		if err != nil {
			t.Fatalf("at %s: %v", tt.now, err)
		}
		var names []string
		for _, p := range got {
			names = append(names, p.Period.String())
			if !p.ClosedAt.Equal(tt.now) {
				t.Errorf("%s closed at %s, want %s", p.Period, p.ClosedAt, tt.now)
			}
		}
		if strings.Join(names, " ") != tt.want {
			t.Errorf("at %s closed %v, want %q", tt.now.Format(time.RFC3339), names, tt.want)
		}
	}
}

// storeMinutes stores, as one pass computed at computed, a minute row for every minute of
// [from, to): acme's whole GPU (1.60/h) and, between lateFrom and lateTo, beta's too; the
// unallocated row holds the rest of a 3.20/h fleet.
func storeMinutes(t *testing.T, conn driver.Conn, from, to, lateFrom, lateTo, computed time.Time) {
	t.Helper()
	var minutes []stored.Minute
	perMinute := 1.60 / 60
	for m := from; m.Before(to); m = m.Add(time.Minute) {
		line := func(tenant, id string) billing.Line {
			return billing.Line{AllocationID: id, Tenant: tenant, Tier: "pro", Node: "node-a", Instance: id, Kind: "gpu", Model: "A100-SXM4-40GB", Fraction: 1,
				Billed: time.Minute, Metered: time.Minute,
				Active: time.Minute, ListCost: perMinute, Cost: perMinute, Efficiency: 0.5, WasteCost: perMinute / 2, Requested: from, Started: from}
		}
		lines := []billing.Line{line("acme", "gpu0")}
		if !m.Before(lateFrom) && m.Before(lateTo) {
			lines = append(lines, line("beta", "gpu1"))
		}
		unallocated := 2*perMinute - float64(len(lines))*perMinute
		minutes = append(minutes, stored.Minute{Start: m, Lines: lines, Report: report.Report{Currency: "USD", UnallocatedListCost: unallocated}})
	}
	if err := stored.WriteMinutes(context.Background(), conn, minutes, computed); err != nil {
		t.Fatal(err)
	}
}

// TestCloseFromMinutes: as the attribution service closes, from the stored minutes. A late
// pass over a closed month's minutes is billed in the next close; a closed month whose minutes
// were not stored again is not recomputed, and no correction repeats.
func TestCloseFromMinutes(t *testing.T) {
	ctx := context.Background()
	conn := chtest.NewDatabase(t, nil)
	storeMinutes(t, conn, day(time.February, 1), day(time.May, 1), time.Time{}, time.Time{}, day(time.May, 1))
	closer := period.Closer{Conn: conn, Book: chtest.Book(), Options: attribution.Options{FromMinutes: true}}
	closedFeb, err := closer.Close(ctx, feb, day(time.May, 2))
	if err != nil {
		t.Fatal(err)
	}
	// 28 days × 24 h × 1.60, each minute's 1.60/60 stored rounded to 12 decimals (≤ 0.5e-12 each).
	minuteRounding := decimal.New(1, -7)
	if want := decimal.RequireFromString("1075.2"); !closedFeb.Cost.Sub(want).Abs().LessThan(minuteRounding) {
		t.Errorf("February's cost %s, want %s", closedFeb.Cost, want)
	}
	// The service recomputes a day of February with beta in it, after the close.
	storeMinutes(t, conn, day(time.February, 20), day(time.February, 21), day(time.February, 20), day(time.February, 21), day(time.May, 3))
	if again, _, err := period.Get(ctx, conn, feb); err != nil || !bytes.Equal(again.Report, closedFeb.Report) {
		t.Fatalf("February changed after a late pass (%v):\n%s", err, again.Report)
	}
	closedMar, err := closer.Close(ctx, mar, day(time.May, 4))
	if err != nil {
		t.Fatal(err)
	}
	if csv := string(closedMar.Report); !strings.Contains(csv, "beta,correction:2026-02,2026-03-01T00:00:00Z,2026-04-01T00:00:00Z,86400.000,38.400000,38.400000,") ||
		!strings.Contains(csv, "__unallocated__,correction:2026-02,2026-03-01T00:00:00Z,2026-04-01T00:00:00Z,,-38.400000,") || strings.Count(csv, "correction:") != 2 {
		t.Errorf("March's report, want beta's day of February as corrections:\n%s", csv)
	}
	// A month of stored minutes is read by chunks of a day: the sums add up, and the waste is
	// the month's from them (efficiency 0.5 of 31 days × 24 h × 1.60).
	if csv := string(closedMar.Report); !strings.Contains(csv, "acme,pro,2026-03-01T00:00:00Z,2026-04-01T00:00:00Z,2678400.000,1190.400000,1190.400000,595.200000,0.000000,0.5000,") {
		t.Errorf("March's acme row:\n%s", csv)
	}
	closedApr, err := closer.Close(ctx, apr, day(time.May, 5))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(closedApr.Report), "correction:") || !closedApr.CorrectionCost.IsZero() {
		t.Errorf("April corrects again:\n%s", closedApr.Report)
	}
	billed, err := period.Billed(ctx, conn, feb)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := billed[period.Key("beta", "pro")].Cost, decimal.RequireFromString("38.4"); !got.Sub(want).Abs().LessThan(minuteRounding) {
		t.Errorf("billed for beta's February over all periods: %s, want %s", got, want)
	}
}

// TestCloseDueFromMinutes: with no period closed, the service's closer waits for a month its
// stored minutes cover in full instead of failing on one they do not.
func TestCloseDueFromMinutes(t *testing.T) {
	ctx := context.Background()
	conn := chtest.NewDatabase(t, nil)
	closer := period.Closer{Conn: conn, Book: chtest.Book(), Options: attribution.Options{FromMinutes: true}}
	tests := []struct {
		name     string
		from, to time.Time // minutes stored before the call
		now      time.Time
		want     string
	}{
		{"nothing stored", time.Time{}, time.Time{}, day(time.April, 5), ""},
		{"started within March", day(time.March, 15), day(time.April, 10), day(time.April, 5), ""},
		{"April covered", day(time.March, 15), day(time.May, 1), day(time.May, 5), "2026-04"},
	}
	for _, tt := range tests {
		if !tt.from.IsZero() {
			storeMinutes(t, conn, tt.from, tt.to, time.Time{}, time.Time{}, tt.to)
		}
		got, err := period.CloseDue(ctx, closer, period.DefaultCloseAfter, tt.now)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		var names []string
		for _, p := range got {
			names = append(names, p.Period.String())
		}
		if strings.Join(names, " ") != tt.want {
			t.Errorf("%s: closed %v, want %q", tt.name, names, tt.want)
		}
	}
}
