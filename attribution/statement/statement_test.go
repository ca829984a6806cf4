package statement

import (
	"bytes"
	"context"
	"errors"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/slicemeter/slicemeter/attribution/period"
	"github.com/slicemeter/slicemeter/attribution/report"
)

var now = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func TestBuild(t *testing.T) {
	f := newFixture(12)
	start, end := november.Bounds(time.UTC)
	month, _ := f.report(context.Background(), start, end, false)
	closed := period.Closed{Period: november, Version: 1, ClosedAt: now}
	lines := []period.Line{
		{Tenant: "acme", Tier: "pro", Cost: decimal.RequireFromString("100.5"), ListCost: decimal.RequireFromString("120")},
		{Tenant: "acme", Corrects: "2026-10", Tier: "pro", Cost: decimal.RequireFromString("-1.25")},
		{Tenant: "globex", Tier: "pro", Cost: decimal.RequireFromString("7")},
	}
	for _, tc := range []struct {
		name            string
		closes          Closes
		wantCost        float64
		wantCorrections int
	}{
		{name: "open", wantCost: rowsCost(month.Tenants, "acme")},
		{name: "closed", closes: func(context.Context, period.Month) (period.Closed, []period.Line, bool, error) {
			return closed, lines, true, nil
		},
			wantCost: 100.5, wantCorrections: 1},
		{name: "not closed yet", closes: func(context.Context, period.Month) (period.Closed, []period.Line, bool, error) {
			return period.Closed{}, nil, false, nil
		}, wantCost: rowsCost(month.Tenants, "acme")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := f.source()
			src.Closes = tc.closes
			st, err := Build(context.Background(), src, "acme", november, now)
			if err != nil {
				t.Fatal(err)
			}
			if !close(st.Totals.Cost, tc.wantCost) {
				t.Errorf("cost %v, want %v", st.Totals.Cost, tc.wantCost)
			}
			if len(st.Corrections) != tc.wantCorrections {
				t.Errorf("%d corrections, want %d", len(st.Corrections), tc.wantCorrections)
			}
			if len(st.Days) != 30 {
				t.Errorf("%d days, want November's 30", len(st.Days))
			}
			var days Totals
			for _, d := range st.Days {
				days.add(rowOf(d.Totals))
			}
			if !close(days.Cost, st.Computed.Cost) || !close(days.WasteCost, st.Computed.WasteCost) || !close(days.OverheadCost, st.Computed.OverheadCost) {
				t.Errorf("days sum to %+v, the period is %+v", days, st.Computed)
			}
			if len(st.Allocations) != 12 {
				t.Errorf("%d line items, want acme's 12", len(st.Allocations))
			}
			for _, a := range st.Allocations {
				if a.Tenant != "acme" {
					t.Errorf("line item of %s in acme's statement", a.Tenant)
				}
			}
			breaches := 0
			for _, tier := range st.Tiers {
				breaches += tier.ColdStartBreaches
			}
			if breaches != len(st.Breaches) || breaches == 0 {
				t.Errorf("%d breaches listed, the tiers count %d (the fixture has some)", len(st.Breaches), breaches)
			}
			// The fixture's pro allocations with a jitter p99 over pro's 5 ms, and only those.
			var jitter []string
			for _, a := range st.Allocations {
				if a.Tier == "pro" && *a.JitterP99 > 5*time.Millisecond {
					jitter = append(jitter, a.AllocationID)
				}
			}
			var listed []string
			for _, b := range st.JitterBreaches {
				listed = append(listed, b.AllocationID)
				if b.SLA != 5*time.Millisecond || b.JitterP99 <= b.SLA {
					t.Errorf("jitter breach %+v", b)
				}
			}
			if !slices.Equal(listed, jitter) || len(jitter) == 0 {
				t.Errorf("jitter breaches listed %v, want %v (the fixture has some)", listed, jitter)
			}
		})
	}
	if _, err := Build(context.Background(), f.source(), "", november, now); err == nil {
		t.Error("a statement without a tenant was built")
	}
}

func rowsCost(rows []report.Row, tenant string) float64 {
	c := 0.0
	for _, r := range rows {
		if r.Tenant == tenant {
			c += r.Cost
		}
	}
	return c
}

func rowOf(t Totals) report.Row {
	return report.Row{Cost: t.Cost, ListCost: t.ListCost, WasteCost: t.WasteCost, OverheadCost: t.OverheadCost, Allocated: t.Allocated, Unmetered: t.Unmetered}
}

func close(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

var external = regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?\s*(https?:)?//`)

func TestRender(t *testing.T) {
	f := newFixture(12)
	for _, tenant := range []string{"acme", "nobody"} {
		st, err := Build(context.Background(), f.source(), tenant, november, now)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := Render(&b, st); err != nil {
			t.Fatal(err)
		}
		page := b.String()
		if m := external.FindString(page); m != "" {
			t.Errorf("%s: the page loads something from elsewhere: %q", tenant, m)
		}
		for _, want := range []string{`data-total="cost">` + money(st.Totals.Cost) + `<`, `data-points="30"`, `@page { size: A4`, `id="status">open`} {
			if !strings.Contains(page, want) {
				t.Errorf("%s: the page lacks %q", tenant, want)
			}
		}
		if tenant == "acme" && len(st.JitterBreaches) == 0 {
			t.Fatal("acme has no jitter breach to list")
		}
		for _, b := range st.JitterBreaches {
			if row := `<td>` + b.AllocationID + `</td><td>` + b.Tier + `</td><td class="n">` + dur(b.JitterP99) + `</td>`; !strings.Contains(page, row) {
				t.Errorf("%s: the page does not list the jitter breach %q", tenant, row)
			}
		}
		if len(st.JitterBreaches) == 0 && !strings.Contains(page, "No jitter p99 over the SLA.") {
			t.Errorf("%s: the page does not say there is no jitter breach", tenant)
		}
		if n := strings.Count(page, `<g class="point"`); n != 30 {
			t.Errorf("%s: %d points in the chart, want 30", tenant, n)
		}
		if strings.Contains(page, "<script") {
			t.Errorf("%s: the page has a script", tenant)
		}
	}
}

// TestBuildReportFails: the reports run at once; the one that fails is named, not the
// others it cancelled, and nothing is built.
func TestBuildReportFails(t *testing.T) {
	f := newFixture(3)
	failed := errors.New("ClickHouse went away")
	start, _ := november.Bounds(time.UTC)
	for _, tc := range []struct {
		name string
		fail time.Time // the window start whose report fails
		want string
	}{
		{"the period", start, "report of the period: ClickHouse went away"},
		{"a day", start.AddDate(0, 0, 17), "report of 2026-11-18: ClickHouse went away"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := f.source()
			src.Report = func(ctx context.Context, from, to time.Time, lines bool) (report.Report, error) {
				if from.Equal(tc.fail) && lines == (tc.name == "the period") {
					return report.Report{}, failed
				}
				if err := ctx.Err(); err != nil {
					return report.Report{}, err
				}
				return f.report(ctx, from, to, lines)
			}
			st, err := Build(context.Background(), src, "acme", november, now)
			if !errors.Is(err, failed) || !strings.Contains(err.Error(), tc.want) || st != nil {
				t.Errorf("statement %v, error %v; want %q", st, err, tc.want)
			}
		})
	}
}
