package service_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/service"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/attribution/stored"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
	"github.com/slicemeter/slicemeter/schemas/scenario"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// The tests share the binary's ClickHouse 18.16 (chtest.NewDatabase); TestMain stops it.
func TestMain(m *testing.M) { localtest.Main(m) }

var book = chtest.Book()

// reportOf is Report's report of [from, to) from the source.
func reportOf(ctx context.Context, conn store.Querier, from, to time.Time, book *pricebook.PriceBook, src store.Samples) (report.Report, error) {
	res, err := attribution.Report(ctx, conn, book, attribution.Options{From: from, To: to, Samples: src})
	return res.Report, err
}

// TestContinuousMinutesSumToReports attributes an hour of a scenario minute by minute into
// ClickHouse, then checks that the stored minutes of any window sum to the report computed
// for that window directly, and that an allocation arriving late is attributed once it
// arrives.
func TestContinuousMinutesSumToReports(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("simulates an hour of a fleet into ClickHouse")
	}
	ctx := context.Background()
	sc, err := scenario.Load(filepath.Join("..", "..", "schemas", "scenario", "testdata", "mig-basic.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	conn := chtest.NewDatabase(t, nil)
	chtest.InsertScenario(t, conn, sc)
	book := sc.Book

	clock := sc.End().Add(30 * time.Second)
	cfg := service.Passes{Delay: 30 * time.Second, Lookback: 10 * time.Minute, Backfill: time.Hour, MaxRecompute: 24 * time.Hour, MaxMinutes: 120}
	runner := service.NewRunner(conn, book, cfg, nil, slog.New(slog.DiscardHandler))
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
	if _, err := stored.FromMinutes(ctx, conn, sc.Start, sc.End().Add(5*time.Minute)); err == nil || !strings.Contains(err.Error(), "5 of its 65 minutes are not attributed yet") {
		t.Errorf("a window beyond the attributed minutes: %v", err)
	}

	// A minute later: the lookback is recomputed, nothing new is closed.
	clock = clock.Add(time.Minute)
	if p, err = runner.Once(ctx); err != nil || p.Fresh != 1 || p.Recomputed != 9 {
		t.Fatalf("second pass %+v, %v: want the 10 minutes of the lookback: 9 recomputed and 1 fresh", p, err)
	}

	// An allocation that arrives late, for minutes long past the lookback, still attributes
	// the samples already stored.
	chtest.InsertAllocations(t, conn, []chtest.AllocationRow{{ID: "late-1", Tenant: "late", Tier: "budget", Node: "node-a", Instance: "gpu0/mig3",
		Requested: sc.Start.Add(5 * time.Minute), Started: sc.Start.Add(5 * time.Minute), Ended: sc.Start.Add(50 * time.Minute), Version: 1}})
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
func checkSums(t *testing.T, c driver.Conn, book *pricebook.PriceBook, from, to time.Time) map[string]total {
	t.Helper()
	ctx := context.Background()
	rep, err := reportOf(ctx, c, from, to, book, store.RawSamples)
	if err != nil {
		t.Fatal(err)
	}
	if errs := billing.CheckInvariants(rep); len(errs) > 0 {
		t.Errorf("invariants: %v", errs)
	}
	totals, err := storedTotals(ctx, c, from, to)
	if err != nil {
		t.Fatal(err)
	}
	byTenant := map[string]total{}
	for _, x := range totals {
		byTenant[x.Tenant] = x
	}
	near := func(what string, got, want float64) {
		if math.Abs(got-want) > billing.Tolerance {
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
		// Efficiency is over the measured time (active_ns), not the metered: time whose
		// activity was unavailable counts in neither.
		if row.Efficiency != nil && x.Active > 0 {
			near(row.Tenant+" efficiency", x.EfficiencyNS/float64(x.Active), *row.Efficiency)
		}
	}
	near("unallocated", byTenant[report.Unallocated].ListCost, rep.UnallocatedListCost)
	// The whole report, from the stored minutes alone.
	fromMinutes, err := stored.FromMinutes(ctx, c, from, to)
	if err != nil {
		t.Fatal(err)
	}
	if errs := billing.CheckInvariants(fromMinutes); len(errs) > 0 {
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
// __unallocated__ alike, whatever the presence period and the sample source, so long as the
// report uses the same. outage-coldstart has a two-minute exporter outage: with a presence
// period of a minute its GPUs are not capacity for part of it, with one of an hour they are.
func TestContinuousScenarios(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("simulates an hour of a fleet per scenario into ClickHouse")
	}
	files, err := filepath.Glob(filepath.Join("..", "..", "schemas", "scenario", "testdata", "*.yaml"))
	if err != nil || len(files) < 3 {
		t.Fatalf("public scenarios: %v, %v", files, err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			sc, err := scenario.Load(file)
			if err != nil {
				t.Fatal(err)
			}
			conn := chtest.NewDatabase(t, nil)
			chtest.InsertScenario(t, conn, sc)
			chtest.RollUp(t, conn)
			book := sc.Book
			clock := sc.End().Add(30 * time.Second)
			pass := func(presence time.Duration, source store.Samples) float64 {
				t.Helper()
				// The lookback covers the hour: every pass recomputes all of it.
				cfg := service.Passes{Delay: 30 * time.Second, Lookback: time.Hour, Backfill: time.Hour, MaxRecompute: time.Hour, MaxMinutes: 120,
					Presence: presence, Samples: source}
				runner := service.NewRunner(conn, book, cfg, nil, slog.New(slog.DiscardHandler))
				runner.SetClock(func() time.Time { return clock })
				clock = clock.Add(time.Second) // each pass a later computed_ns
				if p, err := runner.Once(ctx); err != nil || p.Fresh+p.Recomputed != 60 || !p.From.Equal(sc.Start) {
					t.Fatalf("pass with presence %s from %s: %+v, %v; want the scenario's 60 minutes", presence, source, p, err)
				}
				totals, err := storedTotals(ctx, conn, sc.Start, sc.End())
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
			hour := map[time.Duration]float64{}
			for _, c := range []struct {
				presence time.Duration
				source   store.Samples
			}{{time.Minute, store.RawSamples}, {time.Hour, store.SecondRollup}, {time.Hour, store.RawSamples}} {
				res, err := attribution.Report(ctx, conn, book, attribution.Options{From: sc.Start, To: sc.End(), Samples: c.source, Presence: c.presence})
				if err != nil {
					t.Fatal(err)
				}
				want := res.Report.UnallocatedListCost
				hour[c.presence] = want
				if got := pass(c.presence, c.source); math.Abs(got-want) > billing.Tolerance {
					t.Errorf("presence %s from %s: the minutes' __unallocated__ is %.9f, the hour's %.9f", c.presence, c.source, got, want)
				}
			}
			t.Logf("__unallocated__ of the hour: %.6f with a presence of 1m, %.6f with 1h", hour[time.Minute], hour[time.Hour])
			if name == "outage-coldstart" && hour[time.Hour]-hour[time.Minute] <= billing.Tolerance {
				t.Errorf("a presence of a minute leaves the hour's __unallocated__ at %.6f, as an hour's does: want the outage short of capacity", hour[time.Minute])
			}
			checkSums(t, conn, book, sc.Start, sc.End())
			if name == "outage-coldstart" {
				t.Run("pass by pass", func(t *testing.T) { checkPassByPass(t, sc) })
			}
		})
	}
}

// TestContinuousUnmeasured attributes exporter/testdata/mig-nogpm.yaml (A100s without GPM,
// whose activity is unavailable) minute by minute: the stored minutes' efficiency is over the
// measured time, which is shorter than the metered one there, so that a sum over metered time
// (the dashboards' old drift) would not match the report.
func TestContinuousUnmeasured(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("simulates ten minutes of a fleet into ClickHouse")
	}
	ctx := context.Background()
	sc, err := scenario.Load(filepath.Join("..", "..", "exporter", "testdata", "mig-nogpm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	conn := chtest.NewDatabase(t, nil)
	chtest.InsertScenario(t, conn, sc)
	book := sc.Book
	cfg := service.Passes{Delay: 30 * time.Second, Lookback: 10 * time.Minute, Backfill: 10 * time.Minute, MaxRecompute: time.Hour, MaxMinutes: 120}
	runner := service.NewRunner(conn, book, cfg, nil, slog.New(slog.DiscardHandler))
	runner.SetClock(func() time.Time { return sc.End().Add(30 * time.Second) })
	if p, err := runner.Once(ctx); err != nil || p.Fresh != 10 {
		t.Fatalf("pass %+v, %v: want the scenario's 10 minutes", p, err)
	}
	totals := checkSums(t, conn, book, sc.Start, sc.End())
	rep, err := reportOf(ctx, conn, sc.Start, sc.End(), book, store.RawSamples)
	if err != nil {
		t.Fatal(err)
	}
	drifted := 0
	for _, row := range rep.Tenants {
		x := totals[row.Tenant]
		if row.Efficiency == nil || x.Metered <= 0 {
			continue
		}
		if x.Active > x.Metered {
			t.Errorf("%s: measured %s exceeds metered %s", row.Tenant, x.Active, x.Metered)
		}
		if math.Abs(x.EfficiencyNS/float64(x.Metered)-*row.Efficiency) > billing.Tolerance {
			drifted++
		}
	}
	if drifted == 0 {
		t.Errorf("no tenant's efficiency over metered time differs from the report's: the scenario has no unmeasured time to tell the two apart (totals %+v)", totals)
	}
}

// checkPassByPass runs the service's passes as time goes by, one a minute, each reading the
// presence of only the minutes the last one had not: the stored minutes still sum to the hour.
func checkPassByPass(t *testing.T, sc *scenario.Scenario) {
	ctx := context.Background()
	conn := chtest.NewDatabase(t, nil)
	chtest.InsertScenario(t, conn, sc)
	book := sc.Book
	cfg := service.Passes{Delay: 30 * time.Second, Lookback: 2 * time.Minute, Backfill: time.Minute, MaxRecompute: time.Hour, MaxMinutes: 120, Presence: time.Hour}
	runner := service.NewRunner(conn, book, cfg, nil, slog.New(slog.DiscardHandler))
	for clock := sc.Start.Add(time.Minute + 30*time.Second); !clock.After(sc.End().Add(30 * time.Second)); clock = clock.Add(time.Minute) {
		runner.SetClock(func() time.Time { return clock })
		if _, err := runner.Once(ctx); err != nil {
			t.Fatalf("pass at %s: %v", clock.Format(time.RFC3339), err)
		}
	}
	checkSums(t, conn, book, sc.Start, sc.End())
}

// TestContinuousProblemLogs: an allocation on an instance never sampled and two overlapping
// allocations (as Kafka may deliver them) recur in every minute and every pass recomputes ten
// of them; the service logs each kind of problem at most once a minute, with a count.
func TestContinuousProblemLogs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := chtest.NewDatabase(t, nil)
	var samples []*pb.Sample
	for at := time.Duration(0); at < 12*time.Minute; at += time.Second {
		samples = append(samples, chtest.MigA100.Sample(at, time.Second, true, 0.5))
	}
	chtest.InsertSamples(t, conn, "node-a", samples)
	chtest.InsertAllocations(t, conn, []chtest.AllocationRow{
		{ID: "x1", Tenant: "a", Tier: "pro", Node: "node-a", Instance: chtest.MigA100.ID, Requested: chtest.T0, Started: chtest.T0, Version: 1},
		{ID: "x2", Tenant: "b", Tier: "pro", Node: "node-a", Instance: chtest.MigA100.ID, Requested: chtest.T0.Add(5 * time.Minute), Started: chtest.T0.Add(5 * time.Minute), Version: 1},
		{ID: "ghost", Tenant: "c", Tier: "pro", Node: "node-a", Instance: "gpu9", Requested: chtest.T0, Started: chtest.T0, Version: 1},
	})
	rec := &reasonRecorder{}
	cfg := service.Passes{Delay: 30 * time.Second, Lookback: 10 * time.Minute, Backfill: 10 * time.Minute, MaxRecompute: time.Hour, MaxMinutes: 120}
	runner := service.NewRunner(conn, book, cfg, nil, slog.New(rec))
	clock := chtest.T0.Add(10*time.Minute + 30*time.Second)
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

// TestContinuousUnpricedAndFailingMinute: with a GPU model the price book lacks (one sample),
// an allocation at an unknown tier, an allocation that cannot be computed (a MIG instance whose
// samples say it has 0 compute slices, allocated in minute 4 only) and a minute whose
// computation fails (minute 7, failed on purpose), the pass stores every other minute: the
// unpriced and the broken allocation are left out of the money, the failing minute is in
// Pass.Failed and not stored, and the next pass goes on.
func TestContinuousUnpricedAndFailingMinute(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn := chtest.NewDatabase(t, nil)
	broken := chtest.MigA100
	broken.ID, broken.Slices = "gpu0/mig6", 0
	b200 := chtest.Instance{GPUUUID: "GPU-z", Model: "B200", ID: "gpu7", Kind: pb.Kind_KIND_GPU, SMs: 148, GPUSMs: 148, Mem: 180 << 30, GPUMem: 180 << 30}
	var samples []*pb.Sample
	for at := time.Duration(0); at < 12*time.Minute; at += time.Second {
		samples = append(samples, chtest.MigA100.Sample(at, time.Second, true, 0.5), chtest.WholeA100.Sample(at, time.Second, true, 0.5))
		if at >= 4*time.Minute && at < 5*time.Minute {
			samples = append(samples, broken.Sample(at, time.Second, true, 0.5))
		}
	}
	samples = append(samples, b200.Sample(2*time.Minute, time.Second, true, 1))
	chtest.InsertSamples(t, conn, "node-a", samples)
	at := func(d time.Duration) time.Time { return chtest.T0.Add(d) }
	chtest.InsertAllocations(t, conn, []chtest.AllocationRow{
		{ID: "a", Tenant: "acme", Tier: "pro", Node: "node-a", Instance: chtest.MigA100.ID, Requested: at(0), Started: at(0), Version: 1},
		{ID: "z", Tenant: "zed", Tier: "pro", Node: "node-a", Instance: b200.ID, Requested: at(0), Started: at(0), Version: 1},
		{ID: "g", Tenant: "gil", Tier: "gold", Node: "node-a", Instance: chtest.WholeA100.ID, Requested: at(0), Started: at(0), Version: 1},
		{ID: "x", Tenant: "xen", Tier: "pro", Node: "node-a", Instance: broken.ID, Requested: at(4 * time.Minute), Started: at(4 * time.Minute), Ended: at(5 * time.Minute), Version: 1},
	})
	cfg := service.Passes{Delay: 30 * time.Second, Lookback: 10 * time.Minute, Backfill: 10 * time.Minute, MaxRecompute: time.Hour, MaxMinutes: 120, Presence: time.Hour}
	seen := &minuteRecorder{}
	runner := service.NewRunner(conn, book, cfg, seen, slog.New(slog.DiscardHandler))
	runner.SetReport(func(ctx context.Context, conn store.Querier, book *pricebook.PriceBook, o attribution.Options) (attribution.Result, error) {
		if o.From.Equal(at(7 * time.Minute)) {
			return attribution.Result{}, errors.New("boom")
		}
		return attribution.Report(ctx, conn, book, o)
	})
	clock := at(10*time.Minute + 30*time.Second)
	runner.SetClock(func() time.Time { return clock })
	for pass := range 2 {
		p, err := runner.Once(ctx)
		if err != nil {
			t.Fatalf("pass %d: %v", pass, err)
		}
		if p.Fresh+p.Recomputed != 9 || len(p.Failed) != 1 || p.Failed[0].Error() != "attribute the minute 2026-01-05T00:07:00Z: boom" {
			t.Fatalf("pass %d: %d fresh, %d recomputed, failed %v; want 9 minutes stored and minute 7 failed", pass, p.Fresh, p.Recomputed, p.Failed)
		}
		clock = clock.Add(time.Minute)
	}
	// Every stored minute has zed's allocation on the unpriced GPU (sampled once, in minute 2)
	// and gil's; minute 4 has the broken allocation, left out.
	for _, m := range seen.minutes {
		var got []string
		for _, u := range m.Report.Unpriced {
			got = append(got, u.Kind+"="+u.Name)
		}
		if !slices.Equal(got, []string{"model=B200", "tier=gold"}) {
			t.Errorf("minute %s: unpriced %v, want the B200 and gold", m.Start.Format(time.TimeOnly), got)
		}
		if failed := len(m.Report.Failed); failed != map[bool]int{true: 1}[m.Start.Equal(at(4*time.Minute))] {
			t.Errorf("minute %s: failed %q", m.Start.Format(time.TimeOnly), m.Report.Failed)
		}
	}
	// The stored minutes bill acme alone.
	rep, err := stored.FromMinutes(ctx, conn, at(0), at(7*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	want := 1.60 / 7 * (7 * time.Minute).Hours()
	if len(rep.Tenants) != 1 || rep.Tenants[0].Tenant != "acme" || math.Abs(rep.Tenants[0].Cost-want) > 1e-9 {
		t.Errorf("stored minutes 0-6: %+v; want acme alone at %.9f", rep.Tenants, want)
	}
	if errs := billing.CheckInvariants(rep); len(errs) > 0 {
		t.Errorf("invariants: %v", errs)
	}
	if _, err := stored.FromMinutes(ctx, conn, at(8*time.Minute), at(11*time.Minute)); err != nil {
		t.Errorf("stored minutes 8-10: %v", err)
	}
}

// minuteRecorder is an Observer that keeps the minutes as last attributed.
type minuteRecorder struct{ minutes map[time.Time]stored.Minute }

func (r *minuteRecorder) Minute(m stored.Minute, _ bool, _ []error) {
	if r.minutes == nil {
		r.minutes = map[time.Time]stored.Minute{}
	}
	r.minutes[m.Start] = m
}
