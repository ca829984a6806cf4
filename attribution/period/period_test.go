package period

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

func TestParseAndBounds(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		in         string
		loc        *time.Location
		start, end string
	}{
		{"2026-11", time.UTC, "2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z"},
		{"2026-12", time.UTC, "2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z"},
		{"2026-03", berlin, "2026-02-28T23:00:00Z", "2026-03-31T22:00:00Z"}, // into CEST: 743 h
		{"2026-10", berlin, "2026-09-30T22:00:00Z", "2026-10-31T23:00:00Z"}, // out of CEST: 745 h
	}
	for _, tt := range tests {
		m, err := Parse(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		if m.String() != tt.in {
			t.Errorf("Parse(%q).String() = %q", tt.in, m.String())
		}
		start, end := m.Bounds(tt.loc)
		if start.Format(time.RFC3339) != tt.start || end.Format(time.RFC3339) != tt.end {
			t.Errorf("%s in %s: [%s, %s), want [%s, %s)", tt.in, tt.loc, start.Format(time.RFC3339), end.Format(time.RFC3339), tt.start, tt.end)
		}
		if got := Of(start, tt.loc); got != m {
			t.Errorf("Of(%s) = %s, want %s", start, got, m)
		}
		if got := Of(end.Add(-time.Nanosecond), tt.loc); got != m {
			t.Errorf("Of(end-1ns) = %s, want %s", got, m)
		}
		if got := Of(end, tt.loc); got != m.Add(1) {
			t.Errorf("Of(end) = %s, want %s", got, m.Add(1))
		}
	}
	for _, bad := range []string{"", "2026", "2026-13", "2026-1", "26-11", "2026-11-01", "november"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
	if m := (Month{2026, 12}).Add(1); m != (Month{2027, 1}) {
		t.Errorf("2026-12 + 1 = %s", m)
	}
	if m := (Month{2026, 1}).Add(-1); m != (Month{2025, 12}) {
		t.Errorf("2026-01 - 1 = %s", m)
	}
	if !(Month{2025, 12}).Before(Month{2026, 1}) || (Month{2026, 1}).Before(Month{2026, 1}) {
		t.Error("Before")
	}
}

func TestDiffLines(t *testing.T) {
	d := decimal.RequireFromString
	line := func(tenant, tier string, secs int, cost string) Line {
		return Line{Tenant: tenant, Tier: tier, Allocated: time.Duration(secs) * time.Second, ListCost: d(cost), Cost: d(cost), Currency: "USD"}
	}
	tests := []struct {
		name       string
		recomputed []Line
		billed     []Line
		want       []string // tenant/tier/seconds/cost of each correction
	}{
		{"unchanged", []Line{line("a", "pro", 60, "1.5")}, []Line{line("a", "pro", 60, "1.5")}, nil},
		{"float noise is no correction", []Line{line("a", "pro", 60, "1.500000000001")}, []Line{line("a", "pro", 60, "1.5")}, nil},
		{"late allocation", []Line{line("a", "pro", 60, "1.5"), line("b", "budget", 30, "0.35")}, []Line{line("a", "pro", 60, "1.5")},
			[]string{"b/budget/30s/0.35"}},
		{"longer", []Line{line("a", "pro", 90, "2.25")}, []Line{line("a", "pro", 60, "1.5")}, []string{"a/pro/30s/0.75"}},
		{"gone is credited", []Line{line("a", "pro", 60, "1.5")}, []Line{line("a", "pro", 60, "1.5"), line("z", "pro", 10, "0.25")},
			[]string{"z/pro/-10s/-0.25"}},
		{"tier changed", []Line{line("a", "budget", 60, "1.05")}, []Line{line("a", "pro", 60, "1.5")},
			[]string{"a/budget/1m0s/1.05", "a/pro/-1m0s/-1.5"}},
		{"price change, same seconds", []Line{line("a", "pro", 60, "1.8")}, []Line{line("a", "pro", 60, "1.5")}, []string{"a/pro/0s/0.3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			billed := map[LineKey]Line{}
			for _, l := range tt.billed {
				billed[LineKey{l.Tenant, l.Tier}] = l
			}
			var got []string
			for _, l := range diffLines("2026-11", tt.recomputed, billed) {
				if l.Corrects != "2026-11" || l.Currency != "USD" {
					t.Errorf("line %+v: want corrects 2026-11 in USD", l)
				}
				got = append(got, fmt.Sprintf("%s/%s/%s/%s", l.Tenant, l.Tier, l.Allocated, l.Cost))
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("corrections %v, want %v", got, tt.want)
			}
		})
	}
}
