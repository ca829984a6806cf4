package attribution_test

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/continuous"
	"github.com/slicemeter/slicemeter/attribution/pricebook"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/deploy/local"
	"github.com/slicemeter/slicemeter/schemas/allocation"
	"github.com/slicemeter/slicemeter/schemas/migrations"
	"github.com/slicemeter/slicemeter/schemas/scenario"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// TestContinuousMinutesSumToReports attributes an hour of a scenario minute by minute into
// ClickHouse, then checks that the stored minutes of any window sum to the report computed
// for that window directly, and that an allocation arriving late is attributed once it
// arrives.
func TestContinuousMinutesSumToReports(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates an hour of a fleet into ClickHouse")
	}
	ctx := context.Background()
	sc, err := scenario.Load(filepath.Join("..", "schemas", "scenario", "testdata", "mig-basic.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	conn := newDatabase(t)
	simulate(t, sc, func(node string, samples []*pb.Sample) { insertSamples(t, conn, node, samples) })
	insertAllocations(t, conn, scenarioAllocations(sc))
	book := pricebook.FromScenario(sc)

	clock := sc.End().Add(30 * time.Second)
	cfg := continuous.Config{Delay: 30 * time.Second, Lookback: 10 * time.Minute, Backfill: time.Hour, MaxRecompute: 24 * time.Hour, MaxMinutes: 120}
	runner := continuous.NewRunner(conn, book, cfg, nil, slog.New(slog.DiscardHandler))
	runner.SetClock(func() time.Time { return clock })
	p, err := runner.Once(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p.Fresh != 60 || !p.From.Equal(sc.Start) || !p.To.Equal(sc.End()) {
		t.Fatalf("first pass %+v: want the scenario's 60 minutes", p)
	}
	checkSums(t, conn, book, sc.Start, sc.End())
	checkSums(t, conn, book, sc.Start.Add(10*time.Minute), sc.Start.Add(41*time.Minute))
	if _, err := attribution.FromMinutes(ctx, conn, sc.Start, sc.End().Add(5*time.Minute)); err == nil || !strings.Contains(err.Error(), "5 of its 65 minutes are not attributed yet") {
		t.Errorf("a window beyond the attributed minutes: %v", err)
	}

	// A minute later: the lookback is recomputed, nothing new is closed.
	clock = clock.Add(time.Minute)
	if p, err = runner.Once(ctx); err != nil || p.Fresh != 1 || p.Recomputed != 9 {
		t.Fatalf("second pass %+v, %v: want the 10 minutes of the lookback: 9 recomputed and 1 fresh", p, err)
	}

	// An allocation that arrives late, for minutes long past the lookback, still attributes
	// the samples already stored.
	insertAllocations(t, conn, []allocationRow{{id: "late-1", tenant: "late", tier: "budget", node: "node-a", instance: "gpu0/mig3",
		requested: sc.Start.Add(5 * time.Minute), started: sc.Start.Add(5 * time.Minute), ended: sc.Start.Add(50 * time.Minute), version: 1}})
	clock = clock.Add(time.Minute)
	if p, err = runner.Once(ctx); err != nil || !p.From.Equal(sc.Start.Add(5*time.Minute)) {
		t.Fatalf("pass after a late allocation %+v, %v: want it to start at the allocation's start", p, err)
	}
	totals := checkSums(t, conn, book, sc.Start, sc.End())
	if totals["late"].Cost <= 0 {
		t.Errorf("the late allocation has no cost in the stored minutes: %+v", totals["late"])
	}
}

// checkSums compares the stored minutes of [from, to) with Compute's report of the window.
func checkSums(t *testing.T, c driver.Conn, book *pricebook.PriceBook, from, to time.Time) map[string]continuous.Total {
	t.Helper()
	ctx := context.Background()
	rep, err := attribution.Compute(ctx, c, from, to, book)
	if err != nil {
		t.Fatal(err)
	}
	if errs := attribution.CheckInvariants(rep); len(errs) > 0 {
		t.Errorf("invariants: %v", errs)
	}
	totals, err := continuous.Totals(ctx, c, from, to)
	if err != nil {
		t.Fatal(err)
	}
	byTenant := map[string]continuous.Total{}
	for _, x := range totals {
		byTenant[x.Tenant] = x
	}
	near := func(what string, got, want float64) {
		if math.Abs(got-want) > attribution.Tolerance {
			t.Errorf("[%s, %s) %s: minutes sum to %.9f, the window's report says %.9f", from.Format(time.RFC3339), to.Format(time.RFC3339), what, got, want)
		}
	}
	for _, row := range rep.Tenants {
		x := byTenant[row.Tenant]
		near(row.Tenant+" list_cost", x.ListCost, row.ListCost)
		near(row.Tenant+" cost", x.Cost, row.Cost)
		near(row.Tenant+" waste_cost", x.WasteCost, row.WasteCost)
		near(row.Tenant+" overhead_cost", x.OverheadCost, row.OverheadCost)
		if x.Billed != row.Allocated || x.Billed-x.Metered != row.Unmetered {
			t.Errorf("%s: minutes billed %s metered %s; report allocated %s unmetered %s", row.Tenant, x.Billed, x.Metered, row.Allocated, row.Unmetered)
		}
		if row.Efficiency != nil && x.Metered > 0 {
			near(row.Tenant+" efficiency", x.EfficiencyNS/float64(x.Metered), *row.Efficiency)
		}
	}
	near("unallocated", byTenant[report.Unallocated].ListCost, rep.UnallocatedListCost)
	// The whole report, from the stored minutes alone.
	fromMinutes, err := attribution.FromMinutes(ctx, c, from, to)
	if err != nil {
		t.Fatal(err)
	}
	if errs := attribution.CheckInvariants(fromMinutes); len(errs) > 0 {
		t.Errorf("invariants of the report from minutes: %v", errs)
	}
	var want, got bytes.Buffer
	if err := rep.WriteCSV(&want); err != nil {
		t.Fatal(err)
	}
	if err := fromMinutes.WriteCSV(&got); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Errorf("[%s, %s) from the stored minutes:\n%s\nfrom the samples:\n%s", from.Format(time.RFC3339), to.Format(time.RFC3339), got.String(), want.String())
	}
	if len(byTenant) != len(rep.Tenants)+1 {
		t.Errorf("minutes have tenants %v, the report %d tenants", byTenant, len(rep.Tenants))
	}
	return byTenant
}

// TestContinuousScenarios attributes every public scenario minute by minute and checks that
// the stored minutes of the scenario's hour sum to the report of the hour, tenants and
// __unallocated__ alike. outage-coldstart has a two-minute exporter outage: without the
// presence lookback those minutes would have no capacity and __unallocated__ would be short.
func TestContinuousScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates an hour of a fleet per scenario into ClickHouse")
	}
	files, err := filepath.Glob(filepath.Join("..", "schemas", "scenario", "testdata", "*.yaml"))
	if err != nil || len(files) < 3 {
		t.Fatalf("public scenarios: %v, %v", files, err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			sc, err := scenario.Load(file)
			if err != nil {
				t.Fatal(err)
			}
			conn := newDatabase(t)
			simulate(t, sc, func(node string, samples []*pb.Sample) { insertSamples(t, conn, node, samples) })
			insertAllocations(t, conn, scenarioAllocations(sc))
			book := pricebook.FromScenario(sc)
			rep, err := attribution.Compute(ctx, conn, sc.Start, sc.End(), book)
			if err != nil {
				t.Fatal(err)
			}
			clock := sc.End().Add(30 * time.Second)
			pass := func(presence time.Duration, source attribution.Samples) float64 {
				t.Helper()
				// The lookback covers the hour: every pass recomputes all of it.
				cfg := continuous.Config{Delay: 30 * time.Second, Lookback: time.Hour, Backfill: time.Hour, MaxRecompute: time.Hour, MaxMinutes: 120,
					Presence: presence, Samples: source}
				runner := continuous.NewRunner(conn, book, cfg, nil, slog.New(slog.DiscardHandler))
				runner.SetClock(func() time.Time { return clock })
				clock = clock.Add(time.Second) // each pass a later computed_ns
				if p, err := runner.Once(ctx); err != nil || p.Fresh+p.Recomputed != 60 || !p.From.Equal(sc.Start) {
					t.Fatalf("pass with presence %s from %s: %+v, %v; want the scenario's 60 minutes", presence, source, p, err)
				}
				totals, err := continuous.Totals(ctx, conn, sc.Start, sc.End())
				if err != nil {
					t.Fatal(err)
				}
				for _, x := range totals {
					if x.Tenant == report.Unallocated {
						return x.ListCost
					}
				}
				t.Fatal("no __unallocated__ row stored")
				return 0
			}
			short := pass(0, attribution.RawSamples)
			if name == "outage-coldstart" && math.Abs(short-rep.UnallocatedListCost) <= attribution.Tolerance {
				t.Errorf("without presence the minutes' __unallocated__ is the hour's, %.6f: want the outage's minutes short of capacity", short)
			}
			// The same from the per-second rollup, against the hour's report from it.
			rollUp(t, conn)
			fromRollup, err := attribution.ComputeFrom(ctx, conn, sc.Start, sc.End(), book, attribution.SecondRollup)
			if err != nil {
				t.Fatal(err)
			}
			if got := pass(time.Hour, attribution.SecondRollup); math.Abs(got-fromRollup.UnallocatedListCost) > attribution.Tolerance {
				t.Errorf("from samples_1s with a presence of 1h the minutes' __unallocated__ is %.9f, the hour's %.9f", got, fromRollup.UnallocatedListCost)
			}
			got := pass(time.Hour, attribution.RawSamples)
			t.Logf("__unallocated__: hour %.6f, minutes without presence %.6f, with 1h presence %.6f", rep.UnallocatedListCost, short, got)
			if math.Abs(got-rep.UnallocatedListCost) > attribution.Tolerance {
				t.Errorf("with a presence of 1h the minutes' __unallocated__ is %.9f, the hour's %.9f", got, rep.UnallocatedListCost)
			}
			checkSums(t, conn, book, sc.Start, sc.End())
			if name == "outage-coldstart" {
				t.Run("pass by pass", func(t *testing.T) { checkPassByPass(t, sc) })
			}
		})
	}
}

// checkPassByPass runs the service's passes as time goes by, one a minute, each reading the
// presence of only the minutes the last one had not: the stored minutes still sum to the hour.
func checkPassByPass(t *testing.T, sc *scenario.Scenario) {
	ctx := context.Background()
	conn := newDatabase(t)
	simulate(t, sc, func(node string, samples []*pb.Sample) { insertSamples(t, conn, node, samples) })
	insertAllocations(t, conn, scenarioAllocations(sc))
	book := pricebook.FromScenario(sc)
	cfg := continuous.Config{Delay: 30 * time.Second, Lookback: 2 * time.Minute, Backfill: time.Minute, MaxRecompute: time.Hour, MaxMinutes: 120, Presence: time.Hour}
	runner := continuous.NewRunner(conn, book, cfg, nil, slog.New(slog.DiscardHandler))
	for clock := sc.Start.Add(time.Minute + 30*time.Second); !clock.After(sc.End().Add(30 * time.Second)); clock = clock.Add(time.Minute) {
		runner.SetClock(func() time.Time { return clock })
		if _, err := runner.Once(ctx); err != nil {
			t.Fatalf("pass at %s: %v", clock.Format(time.RFC3339), err)
		}
	}
	checkSums(t, conn, book, sc.Start, sc.End())
}

// TestServiceQueriesCurrentDialect runs the queries of the presence lookback (every sample
// source) and of the Kafka events' overlap check, as sent, through chDB (current ClickHouse):
// they must run there as on 18.16.
func TestServiceQueriesCurrentDialect(t *testing.T) {
	recorder := &queryRecorder{}
	conn := newDatabaseLogged(t, slog.New(recorder))
	ctx := context.Background()
	insertSamples(t, conn, "node-a", []*pb.Sample{migA100.sample(0, time.Second, true, 0.5), wholeA100.sample(-30*time.Minute, time.Second, true, 1)})
	insertAllocations(t, conn, []allocationRow{{id: "m", tenant: "a", tier: "pro", node: "node-a", instance: migA100.id, requested: t0, started: t0, version: 1}})
	rollUp(t, conn)
	for _, source := range []attribution.Samples{attribution.RawSamples, attribution.SecondRollup, attribution.MinuteRollup} {
		p, err := attribution.ReadPresence(ctx, conn, t0.Add(time.Minute), t0.Add(2*time.Minute), time.Hour, source)
		if err != nil {
			t.Fatal(err)
		}
		// Both GPUs were sampled within the hour before the minute's end, neither in it.
		rep, absent, err := p.Extend(report.Report{}, t0.Add(time.Minute), t0.Add(2*time.Minute), book)
		if err != nil || len(absent) != 2 || rep.CapacityListCost <= 0 || rep.UnallocatedListCost != rep.CapacityListCost {
			t.Errorf("%s: presence added %v, %+v, %v; want both GPUs", source, absent, rep, err)
		}
		if _, _, err := p.Extend(report.Report{}, t0.Add(2*time.Minute), t0.Add(3*time.Minute), book); err == nil {
			t.Errorf("%s: a minute past what the presence read was extended", source)
		}
	}
	refused, err := allocation.CheckEvents(ctx, conn, []allocation.Event{{Allocation: allocation.Allocation{ID: "n", Tenant: "b", Tier: "pro",
		Node: "node-a", Instance: migA100.id, RequestedAt: t0, StartedAt: t0}, Version: 1}})
	if err != nil || len(refused) != 1 {
		t.Fatalf("check an overlapping event: %v, %v", refused, err)
	}
	script := filepath.Join(t.TempDir(), "service.sql")
	if err := os.WriteFile(script, []byte(strings.Join(recorder.selects(), ";\n")+";\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, f := range migrations.Files() {
		files = append(files, filepath.Join("..", "schemas", "migrations", f))
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := local.CheckWithChDB(ctx, append(files, script)...); err != nil {
		t.Fatal(err)
	}
}

// TestContinuousProblemLogs: an allocation on an instance never sampled and two overlapping
// allocations (as Kafka may deliver them) recur in every minute and every pass recomputes ten
// of them; the service logs each kind of problem at most once a minute, with a count.
func TestContinuousProblemLogs(t *testing.T) {
	if testing.Short() {
		t.Skip("needs ClickHouse")
	}
	ctx := context.Background()
	conn := newDatabase(t)
	var samples []*pb.Sample
	for at := time.Duration(0); at < 12*time.Minute; at += time.Second {
		samples = append(samples, migA100.sample(at, time.Second, true, 0.5))
	}
	insertSamples(t, conn, "node-a", samples)
	insertAllocations(t, conn, []allocationRow{
		{id: "x1", tenant: "a", tier: "pro", node: "node-a", instance: migA100.id, requested: t0, started: t0, version: 1},
		{id: "x2", tenant: "b", tier: "pro", node: "node-a", instance: migA100.id, requested: t0.Add(5 * time.Minute), started: t0.Add(5 * time.Minute), version: 1},
		{id: "ghost", tenant: "c", tier: "pro", node: "node-a", instance: "gpu9", requested: t0, started: t0, version: 1},
	})
	rec := &reasonRecorder{}
	cfg := continuous.Config{Delay: 30 * time.Second, Lookback: 10 * time.Minute, Backfill: 10 * time.Minute, MaxRecompute: time.Hour, MaxMinutes: 120}
	runner := continuous.NewRunner(conn, book, cfg, nil, slog.New(rec))
	clock := t0.Add(10*time.Minute + 30*time.Second)
	runner.SetClock(func() time.Time { return clock })
	for pass, want := range []string{
		"allocation_left_out invariant_overlap overlap",
		// A minute later (minutes 1-10): each once, with how many the first pass held back.
		"allocation_left_out(9) invariant_overlap(4) overlap(4)",
		// A second later, the same ten minutes again: nothing.
		"",
		// A minute later: what the two passes before held back (minutes 1-10 twice, less the one logged).
		"allocation_left_out(19) invariant_overlap(11) overlap(11)",
	} {
		rec.reasons = nil
		if p, err := runner.Once(ctx); err != nil || p.Fresh+p.Recomputed != 10 && pass == 0 {
			t.Fatalf("pass %d: %+v, %v", pass, p, err)
		}
		if got := strings.Join(rec.reasons, " "); got != want {
			t.Errorf("pass %d logged %q, want %q", pass, got, want)
		}
		if pass != 1 {
			clock = clock.Add(time.Minute)
		} else {
			clock = clock.Add(time.Second)
		}
	}
}

// reasonRecorder is a slog.Handler that keeps the reason of each record, with the count of
// those not logged before it in parentheses, sorted within a pass by the test.
type reasonRecorder struct{ reasons []string }

func (r *reasonRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *reasonRecorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *reasonRecorder) WithGroup(string) slog.Handler            { return r }
func (r *reasonRecorder) Handle(_ context.Context, rec slog.Record) error {
	var reason, held string
	rec.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "reason":
			reason = a.Value.String()
		case "not_logged_since_last":
			held = "(" + a.Value.String() + ")"
		}
		return true
	})
	if reason != "" {
		r.reasons = append(r.reasons, reason+held)
		slices.Sort(r.reasons)
	}
	return nil
}

// BenchmarkContinuousPresence reads the presence of a usual pass — the lookback's ten minutes
// and one fresh — with a presence lookback of an hour, over the benchmark fleet (bench_test.go;
// SLICEMETER_BENCH_INSTANCES, SLICEMETER_BENCH_RAW=0 for samples_1s only): "first" reads it
// all, as after a start; "next" only what the pass a minute before had not read, as the
// service's passes do.
func BenchmarkContinuousPresence(b *testing.B) {
	f := newBenchFleet(b)
	ctx := context.Background()
	end := f.start.Add(time.Duration(f.seconds) * time.Second).Truncate(time.Minute)
	check := func(b *testing.B, p *attribution.Presence) {
		if _, absent, err := p.Extend(report.Report{}, end.Add(-time.Minute), end, book); err != nil || len(absent) != 0 {
			b.Fatalf("every GPU is sampled in every minute: %v absent, %v", absent, err)
		}
	}
	for _, source := range []attribution.Samples{attribution.MinuteRollup, attribution.SecondRollup, attribution.RawSamples} {
		if source == attribution.RawSamples && !f.raw {
			continue
		}
		b.Run(source.String()+"/first", func(b *testing.B) {
			for b.Loop() {
				p, err := attribution.ReadPresence(ctx, f.conn, end.Add(-11*time.Minute), end, time.Hour, source)
				if err != nil {
					b.Fatal(err)
				}
				check(b, p)
			}
		})
		b.Run(source.String()+"/next", func(b *testing.B) {
			before, err := attribution.ReadPresence(ctx, f.conn, end.Add(-12*time.Minute), end.Add(-time.Minute), time.Hour, source)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				p, err := before.Advance(ctx, f.conn, end.Add(-11*time.Minute), end, time.Hour, source)
				if err != nil {
					b.Fatal(err)
				}
				check(b, p)
			}
		})
	}
}
