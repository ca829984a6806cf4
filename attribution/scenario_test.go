package attribution_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
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
	"github.com/slicemeter/slicemeter/schemas/pricebook"
	"github.com/slicemeter/slicemeter/schemas/scenario"
	"github.com/slicemeter/slicemeter/schemas/scenario/expected"
)

// TestScenarios runs every public scenario through the simulator into ClickHouse and checks
// that the report from raw samples, samples_1s and samples_1m each recovers the scenario's
// expected report within the scenario checks' tolerances, and that the three agree with each
// other to 1e-6 on money and seconds and 1e-4 on ratios (one bill whatever the path). Then,
// with the minutes the attribution service stores from them, the four paths (raw, rollup-1s,
// rollup-1m, from-minutes) agree the same way on whole-minute sub-windows of the hour: every
// minute alone and every ten minutes to the end (scenarioWindows), or every one of the 1,830
// with SLICEMETER_SCENARIO_WINDOWS=all.
func TestScenarios(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("simulates an hour of a fleet per scenario")
	}
	dir := filepath.Join("..", "schemas", "scenario", "testdata")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) < 4 {
		t.Fatalf("public scenarios: %v, %v", files, err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sc, err := scenario.Load(file)
			if err != nil {
				t.Fatal(err)
			}
			want := readCSV(t, filepath.Join(dir, name+".expected.csv"))
			conn := newDatabase(t)
			chtest.InsertScenario(t, conn, sc)
			chtest.RollUp(t, conn)
			book := sc.Book

			var raw report.Report
			for _, source := range []store.Samples{store.RawSamples, store.SecondRollup, store.MinuteRollup} {
				// With the line items, which must sum to the tenant rows.
				r, err := withLineItems(context.Background(), conn, attribution.Options{From: sc.Start, To: sc.End(), Samples: source}, book)
				if err != nil {
					t.Fatal(err)
				}
				if errs := billing.CheckInvariants(r); len(errs) > 0 {
					t.Errorf("%s: invariants: %v", source, errs)
				}
				var got bytes.Buffer
				if err := r.WriteCSV(&got); err != nil {
					t.Fatal(err)
				}
				rows, err := csv.NewReader(&got).ReadAll()
				if err != nil {
					t.Fatal(err)
				}
				if d := expected.Compare(rows, want, sc.Interval.Seconds()); len(d) > 0 {
					t.Errorf("%s: report differs from the expected one:\n  %s", source, strings.Join(d, "\n  "))
				}
				if source == store.RawSamples {
					raw = r
					continue
				}
				d, money, ratio := samePaths(raw, r)
				t.Logf("%s against raw samples: money and seconds within %.3g, ratios within %.3g", source, money, ratio)
				if len(d) > 0 {
					t.Errorf("%s disagrees with raw samples:\n  %s", source, strings.Join(d, "\n  "))
				}
			}
			checkSecondEdges(t, conn, sc, book)
			checkSubWindows(t, conn, sc, book, os.Getenv("SLICEMETER_SCENARIO_WINDOWS") == "all")
		})
	}
}

// scenarioWindows are the whole-minute windows of propertyWindows checked on a public scenario:
// all of them, or (as the hour's reports are minutes each on a shared machine) the whole hour,
// every minute alone and every ten minutes to the end: each minute boundary is a window's start
// and end, where partial minutes and the rollups' approximations would show.
func scenarioWindows(minutes int, all bool) [][2]int {
	if all {
		return propertyWindows(minutes, true)
	}
	var out [][2]int
	for _, w := range propertyWindows(minutes, false) {
		if w[1]-w[0] == 1 || w[1] == minutes && w[0]%10 == 0 {
			out = append(out, w)
		}
	}
	return out
}

// checkSubWindows stores the scenario's minutes with one pass of the attribution service, then
// checks that every path's report of each whole-minute window of scenarioWindows meets the
// invariants and agrees with the one from raw samples (samePaths).
func checkSubWindows(t *testing.T, conn driver.Conn, sc *scenario.Scenario, book *pricebook.PriceBook, all bool) {
	t.Helper()
	ctx := context.Background()
	minutes := int(sc.Duration / time.Minute)
	runner := service.NewRunner(conn, book, service.Passes{Backfill: sc.Duration, MaxMinutes: minutes, Samples: store.RawSamples},
		nil, slog.New(slog.DiscardHandler))
	runner.SetClock(func() time.Time { return sc.End() })
	if p, err := runner.Once(ctx); err != nil || p.Fresh+p.Recomputed != minutes {
		t.Fatalf("attribution pass: %+v, %v; want the scenario's %d minutes", p, err, minutes)
	}
	paths := reportPaths(ctx, conn, book)
	windows := scenarioWindows(minutes, all)
	spent := make([]time.Duration, len(paths))
	worst := map[string][2]float64{} // per path: money and seconds, ratios
	for _, w := range windows {
		from, to := sc.Start.Add(time.Duration(w[0])*time.Minute), sc.Start.Add(time.Duration(w[1])*time.Minute)
		var raw report.Report
		for i, p := range paths {
			began := time.Now()
			rep, err := p.compute(from, to)
			spent[i] += time.Since(began)
			if err != nil {
				t.Fatalf("%s [%dm, %dm): %v", p.name, w[0], w[1], err)
			}
			if errs := billing.CheckInvariants(rep); len(errs) > 0 {
				t.Errorf("%s [%dm, %dm): invariants: %v", p.name, w[0], w[1], errs)
			}
			if p.name == "raw" {
				raw = rep
				continue
			}
			d, money, ratio := samePaths(raw, rep)
			worst[p.name] = [2]float64{max(worst[p.name][0], money), max(worst[p.name][1], ratio)}
			if len(d) > 0 {
				t.Errorf("%s [%dm, %dm) disagrees with raw samples:\n  %s", p.name, w[0], w[1], strings.Join(d, "\n  "))
			}
		}
	}
	for i, p := range paths {
		t.Logf("%d whole-minute windows from %s in %s; against raw samples: money and seconds within %.3g, ratios within %.3g",
			len(windows), p.name, spent[i].Round(time.Millisecond), worst[p.name][0], worst[p.name][1])
	}
}

// checkSecondEdges checks windows whose edges fall inside minutes, as the attribution
// service's trailing window for the tenant gauges does (now − delay, whole seconds), which it
// reads from samples_1m where its passes read samples_1s: the per-minute rollup's report (its
// partial minutes from samples_1s) must equal the per-second one's and the raw samples'.
func checkSecondEdges(t *testing.T, conn driver.Conn, sc *scenario.Scenario, book *pricebook.PriceBook) {
	t.Helper()
	ctx := context.Background()
	for _, w := range [][2]time.Duration{
		{17 * time.Second, 47*time.Minute + 43*time.Second},
		{5*time.Minute + 30*time.Second, sc.Duration - 1*time.Second},
		{0, 29*time.Minute + 1*time.Second},
		{sc.Duration - 61*time.Second, sc.Duration - 59*time.Second},
	} {
		from, to := sc.Start.Add(w[0]), sc.Start.Add(w[1])
		var raw report.Report
		for _, source := range []store.Samples{store.RawSamples, store.SecondRollup, store.MinuteRollup} {
			res, err := attribution.Report(ctx, conn, book, attribution.Options{From: from, To: to, Samples: source, Now: sc.End().Add(time.Hour)})
			if err != nil {
				t.Fatalf("%s [%s, %s): %v", source, w[0], w[1], err)
			}
			if source == store.RawSamples {
				raw = res.Report
				continue
			}
			if d, _, _ := samePaths(raw, res.Report); len(d) > 0 {
				t.Errorf("%s [%s, %s) disagrees with raw samples:\n  %s", source, w[0], w[1], strings.Join(d, "\n  "))
			}
		}
	}
}

// samePaths lists where two reports of one window differ by more than one bill allows: 1e-6
// on money and seconds, 1e-4 on ratios.
func samePaths(a, b report.Report) (d []string, money, ratio float64) {
	near := func(what string, x, y, tol float64) {
		if tol < 1e-5 {
			money = max(money, math.Abs(x-y))
		} else {
			ratio = max(ratio, math.Abs(x-y))
		}
		if math.Abs(x-y) > tol {
			d = append(d, what+": "+ftoa(x)+" vs "+ftoa(y))
		}
	}
	near("unallocated", a.UnallocatedListCost, b.UnallocatedListCost, 1e-6)
	rows := map[string]report.Row{}
	for _, r := range b.Tenants {
		rows[r.Tenant] = r
	}
	if len(a.Tenants) != len(b.Tenants) {
		d = append(d, "tenants differ")
	}
	for _, x := range a.Tenants {
		y := rows[x.Tenant]
		near(x.Tenant+" allocated", x.Allocated.Seconds(), y.Allocated.Seconds(), 1e-6)
		near(x.Tenant+" unmetered", x.Unmetered.Seconds(), y.Unmetered.Seconds(), 1e-6)
		near(x.Tenant+" list_cost", x.ListCost, y.ListCost, 1e-6)
		near(x.Tenant+" cost", x.Cost, y.Cost, 1e-6)
		near(x.Tenant+" waste_cost", x.WasteCost, y.WasteCost, 1e-6)
		near(x.Tenant+" overhead_cost", x.OverheadCost, y.OverheadCost, 1e-6)
		if (x.Efficiency == nil) != (y.Efficiency == nil) {
			d = append(d, x.Tenant+" efficiency present in one only")
		} else if x.Efficiency != nil {
			near(x.Tenant+" efficiency", *x.Efficiency, *y.Efficiency, 1e-4)
		}
		// Memory efficiency and energy: the same per-minute sums on every path (1e-9 relative).
		same := func(what string, a, b *float64) {
			if (a == nil) != (b == nil) || a != nil && math.Abs(*a-*b) > 1e-9*math.Abs(*a)+1e-12 {
				d = append(d, x.Tenant+" "+what+": "+show(a)+" vs "+show(b))
			}
		}
		same("memory_efficiency", x.MemoryEfficiency, y.MemoryEfficiency)
		same("energy_kwh", x.EnergyKWh, y.EnergyKWh)
	}
	return d, money, ratio
}

func ftoa(v float64) string { return strconv.FormatFloat(v, 'g', 12, 64) }

func show(v *float64) string {
	if v == nil {
		return "empty"
	}
	return strconv.FormatFloat(*v, 'g', 15, 64)
}

func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(bytes.NewReader(text)).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return rows
}
