package service_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/shopspring/decimal"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/period"
	attrpricebook "github.com/slicemeter/slicemeter/attribution/pricebook"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/service"
	"github.com/slicemeter/slicemeter/attribution/stored"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// emptyMinutes stores [from, to) as the service stores minutes without GPUs or allocations
// (the marker row alone), as one pass computed at computed: a month attributed minute by
// minute would take the test an hour.
func emptyMinutes(t *testing.T, conn driver.Conn, from, to, computed time.Time) {
	t.Helper()
	var minutes []stored.Minute
	for m := from; m.Before(to); m = m.Add(time.Minute) {
		minutes = append(minutes, stored.Minute{Start: m, Report: report.Report{WindowStart: m, WindowEnd: m.Add(time.Minute), Currency: "USD"}})
	}
	if err := stored.WriteMinutes(context.Background(), conn, minutes, computed); err != nil {
		t.Fatal(err)
	}
}

// sameReports fails unless both reports bill every tenant and tier alike (to 1e-6).
func sameReports(t *testing.T, what string, got, want report.Report) {
	t.Helper()
	key := func(r report.Row) string { return r.Tenant + "/" + r.Tier }
	rows := map[string]report.Row{}
	for _, r := range want.Rows() {
		rows[key(r)] = r
	}
	if len(got.Rows()) != len(rows) {
		t.Errorf("%s: %d rows, want %d:\n%+v\nwant\n%+v", what, len(got.Rows()), len(rows), got.Rows(), want.Rows())
	}
	for _, r := range got.Rows() {
		w := rows[key(r)]
		if r.Allocated != w.Allocated || math.Abs(r.Cost-w.Cost) > 1e-6 || math.Abs(r.ListCost-w.ListCost) > 1e-6 {
			t.Errorf("%s, %s: allocated %s, cost %.9f, list %.9f; want %s, %.9f, %.9f", what, key(r), r.Allocated, r.Cost, r.ListCost,
				w.Allocated, w.Cost, w.ListCost)
		}
	}
}

// TestPriceChangeCorrectsClosedPeriod stores minutes with book A and closes February from
// them, then restarts the service's runner with book B, which raises the A100's price from
// 23:45 on the last day of February: the runner attributes the stored minutes again from
// there (in passes, resuming after a restart), February reads back byte-identical, March's
// close carries the difference as a correction line, and the stored minutes give the raw
// report's figures.
func TestPriceChangeCorrectsClosedPeriod(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("attributes three hours of minutes into ClickHouse")
	}
	ctx := context.Background()
	conn := chtest.NewDatabase(t, nil)
	var (
		feb, mar   = period.Month{Year: 2026, Month: time.February}, period.Month{Year: 2026, Month: time.March}
		febStart   = time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
		marStart   = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
		aprStart   = time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
		fleetStart = marStart.Add(-30 * time.Minute) // the A100's samples and allocation: half an hour on each side of March 1
		fleetEnd   = marStart.Add(30 * time.Minute)
		change     = marStart.Add(-15 * time.Minute)
	)
	var samples []*pb.Sample
	for at := fleetStart; at.Before(fleetEnd); at = at.Add(time.Minute) {
		samples = append(samples, chtest.WholeA100.Sample(at.Sub(chtest.T0), time.Minute, true, 0.5))
	}
	chtest.InsertSamples(t, conn, "node-a", samples)
	chtest.InsertAllocations(t, conn, []chtest.AllocationRow{{ID: "a1", Tenant: "acme", Tier: "pro", Node: "node-a", Instance: chtest.WholeA100.ID,
		Requested: fleetStart, Started: fleetStart, Ended: fleetEnd, Version: 1}})
	emptyMinutes(t, conn, febStart, fleetStart, fleetStart)

	bookA := chtest.Book()
	bookB := chtest.Book()
	bookB.Changes = []pricebook.Change{{Effective: change, Prices: map[string]float64{"A100-SXM4-40GB": 2.00}}}
	cfg := service.Passes{Delay: 30 * time.Second, Lookback: 10 * time.Minute, Backfill: time.Hour, MaxRecompute: 30 * time.Minute, MaxMinutes: 1000}
	// MaxRecompute: the allocation is received now, after the simulated passes: each restart takes
	// it for late. Half an hour keeps that recomputation after the change.
	runner := func(book *pricebook.PriceBook, maxMinutes int, clock time.Time) *service.Runner {
		c := cfg
		c.MaxMinutes = maxMinutes
		r := service.NewRunner(conn, book, c, nil, slog.New(slog.DiscardHandler))
		r.SetClock(func() time.Time { return clock })
		return r
	}

	// Book A: the first pass records it and attributes up to 01:00 on March 1.
	clock := marStart.Add(time.Hour + 30*time.Second)
	ra := runner(bookA, 1000, clock)
	if p, err := ra.Once(ctx); err != nil || !p.From.Equal(fleetStart) || !p.To.Equal(marStart.Add(time.Hour)) {
		t.Fatalf("pass with book A: %+v, %v", p, err)
	}
	if ra.Repricing() {
		t.Error("the first book recorded re-attributes something")
	}
	recA, ok, err := stored.LatestBook(ctx, conn)
	if _, hashA, _ := bookA.Canonical(); err != nil || !ok || recA.Hash != hashA || recA.Pending() {
		t.Fatalf("book A's record: %+v, %v, %v", recA, ok, err)
	}
	closer := func(book *pricebook.PriceBook) period.Closer {
		return period.Closer{Conn: conn, Book: book, Options: attribution.Options{FromMinutes: true, Delay: cfg.Delay}}
	}
	closedFeb, err := closer(bookA).Close(ctx, feb, clock)
	if err != nil {
		t.Fatal(err)
	}
	// acme: the last half hour of February at 1.60.
	if !closedFeb.Cost.Sub(decimal.RequireFromString("0.8")).Abs().LessThan(decimal.New(1, -9)) {
		t.Fatalf("February closed at %s, want 0.8:\n%s", closedFeb.Cost, closedFeb.Report)
	}

	// Restart with book B, 30 minutes a pass: the re-attribution starts at the change.
	clock = clock.Add(10 * time.Minute)
	rb := runner(bookB, 30, clock)
	p, err := rb.Once(ctx)
	if err != nil || !p.From.Equal(change) || !p.To.Equal(change.Add(30*time.Minute)) || p.Recomputed != 30 {
		t.Fatalf("first pass with book B: %+v, %v; want [%s, +30m) recomputed", p, err, change)
	}
	recB, ok, err := stored.LatestBook(ctx, conn)
	if err != nil || !ok || !recB.From.Equal(change) || !recB.To.Equal(marStart.Add(time.Hour)) || !recB.Next.Equal(p.To) ||
		!rb.Repricing() || recB.Reason != "prices.A100-SXM4-40GB" || !recB.FirstSeen.Equal(clock) {
		t.Fatalf("book B's record after a pass: %+v, %v, %v (repricing %v)", recB, ok, err, rb.Repricing())
	}
	book, err := pricebook.FromCanonical(recB.Book)
	if d, differ := attrpricebook.Differ(book, bookB); err != nil || differ {
		t.Errorf("book B as recorded differs: %+v, %v", d, err)
	}

	// Restarted again mid-way: it resumes where the last pass stopped.
	rc := runner(bookB, 30, clock)
	for i := 0; ; i++ {
		p, err := rc.Once(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 && !p.From.Equal(recB.Next) {
			t.Errorf("the restarted re-attribution begins at %s, want %s", p.From, recB.Next)
		}
		if !rc.Repricing() {
			break
		}
		if i == 5 {
			t.Fatalf("still re-attributing after %d passes: %+v", i+1, p)
		}
	}
	if rec, _, err := stored.LatestBook(ctx, conn); err != nil || rec.Pending() || !rec.Next.Equal(rec.To) {
		t.Errorf("book B's record when done: %+v, %v", rec, err)
	}
	// Once more with book B: nothing left to do.
	if rd := runner(bookB, 30, clock); rd.Repricing() {
		t.Error("a finished re-attribution resumes")
	} else if p, err := rd.Once(ctx); err != nil || rd.Repricing() || p.From.Before(clock.Add(-cfg.MaxRecompute).Truncate(time.Minute)) {
		t.Errorf("a restart after the re-attribution: %+v, %v", p, err)
	}

	// The stored minutes now bill what the samples do with book B.
	for _, w := range [][2]time.Time{{febStart, marStart}, {marStart, clock.Truncate(time.Minute).Add(-time.Minute)}} {
		raw, err := attribution.Report(ctx, conn, bookB, attribution.Options{From: w[0], To: w[1], Now: clock})
		if err != nil {
			t.Fatal(err)
		}
		minutes, err := attribution.Report(ctx, conn, bookB, attribution.Options{From: w[0], To: w[1], Now: clock, FromMinutes: true})
		if err != nil {
			t.Fatal(err)
		}
		sameReports(t, fmt.Sprintf("[%s, %s) from the stored minutes", w[0].Format(time.RFC3339), w[1].Format(time.RFC3339)), minutes.Report, raw.Report)
	}

	// February is as closed; March's close corrects it by 15 minutes at 2.00 − 1.60.
	again, ok, err := period.Get(ctx, conn, feb)
	if err != nil || !ok || !bytes.Equal(again.Report, closedFeb.Report) {
		t.Fatalf("February read back (%v, %v):\n%s\nclosed as\n%s", ok, err, again.Report, closedFeb.Report)
	}
	emptyMinutes(t, conn, rc.Done(), aprStart, clock)
	closedMar, err := closer(bookB).Close(ctx, mar, aprStart.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	csv := string(closedMar.Report)
	if line := "acme,correction:2026-02,2026-03-01T00:00:00Z,2026-04-01T00:00:00Z,0.000,0.100000,0.100000,"; !strings.Contains(csv, line) {
		t.Errorf("March's report lacks the correction %q:\n%s", line, csv)
	}
	if !closedMar.CorrectionCost.Sub(decimal.RequireFromString("0.1")).Abs().LessThan(period.Tolerance) {
		t.Errorf("March's correction cost %s, want 0.1", closedMar.CorrectionCost)
	}
	// acme's half hour of March at 2.00.
	if !closedMar.Cost.Sub(decimal.RequireFromString("1")).Abs().LessThan(period.Tolerance) {
		t.Errorf("March's cost %s, want 1:\n%s", closedMar.Cost, csv)
	}
	// What the periods billed for February is February with book B.
	billed, err := period.Billed(ctx, conn, feb)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := attribution.Report(ctx, conn, bookB, attribution.Options{From: febStart, To: marStart, Now: aprStart})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range raw.Report.Rows() {
		b := billed[period.Key(r.Tenant, r.Tier)]
		if b.Cost.Sub(decimal.NewFromFloat(r.Cost)).Abs().GreaterThan(decimal.New(1, -6)) || b.Allocated != r.Allocated {
			t.Errorf("billed for February, %s/%s: %s, %s; February with book B: %.6f, %s", r.Tenant, r.Tier, b.Cost, b.Allocated, r.Cost, r.Allocated)
		}
	}
}

func TestReachBack(t *testing.T) {
	t.Parallel()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	first := time.Date(2024, 6, 10, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		first  time.Time
		closed *period.Month
		zone   *time.Location
		want   time.Time
	}{
		{name: "nothing stored", closed: &period.Month{Year: 2026, Month: time.March}, zone: time.UTC},
		{name: "none closed: from the first stored minute", first: first, zone: time.UTC, want: first},
		{name: "closed through March 2026: April is open, its close corrects from April 2025", first: first,
			closed: &period.Month{Year: 2026, Month: time.March}, zone: time.UTC, want: time.Date(2025, 4, 1, 0, 0, 0, 0, time.UTC)},
		{name: "in the book's zone", first: first, closed: &period.Month{Year: 2026, Month: time.March}, zone: berlin,
			want: time.Date(2025, 3, 31, 22, 0, 0, 0, time.UTC)},
		{name: "the first stored minute is later", first: first, closed: &period.Month{Year: 2024, Month: time.December}, zone: time.UTC, want: first},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := service.ReachBack(tc.first, tc.closed, tc.zone); !got.Equal(tc.want) {
				t.Errorf("ReachBack: %s, want %s", got, tc.want)
			}
		})
	}
}
