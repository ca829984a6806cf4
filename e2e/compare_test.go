package e2e

import (
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Tolerances of the acceptance check (issue 2): money and seconds ±1e-6 (relative 1e-6 on
// money); waste, overhead and efficiency ±0.5 %; jitter ±2 %; cold start ±1 sampling interval;
// unmetered ±2 intervals; breaches exact. Printed values are rounded, so one unit in the last
// printed place is allowed on top where the tolerance is below it.
type tolerance struct {
	abs, rel float64
	exact    bool
}

func tolerances(interval float64) map[string]tolerance {
	money := tolerance{abs: 1e-6 + 1e-9, rel: 1e-6}
	return map[string]tolerance{
		"tenant": {exact: true}, "tier": {exact: true}, "window_start": {exact: true}, "window_end": {exact: true},
		"currency": {exact: true}, "cold_start_breaches": {exact: true},
		"allocated_seconds": {abs: 1e-3 + 1e-9}, // printed with 3 decimals
		"list_cost":         money, "cost": money,
		"waste_cost":        {abs: 1e-6 + 1e-9, rel: 0.005},
		"overhead_cost":     {abs: 1e-6 + 1e-9, rel: 0.005},
		"efficiency":        {abs: 1e-4 + 1e-9, rel: 0.005},
		"jitter_p99_ms":     {abs: 1e-3 + 1e-9, rel: 0.02},
		"cold_start_max_s":  {abs: interval + 1e-9},
		"unmetered_seconds": {abs: 2*interval + 1e-9},
	}
}

func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return rows
}

// parseCSV parses a report printed as CSV.
func parseCSV(t *testing.T, text string) [][]string {
	t.Helper()
	rows, err := csv.NewReader(strings.NewReader(text)).ReadAll()
	if err != nil {
		t.Fatalf("report CSV: %v\n%s", err, text)
	}
	return rows
}

// compareReports returns every difference between got and want beyond the tolerances.
func compareReports(got, want [][]string, interval float64) []string {
	var diffs []string
	if len(got) == 0 || len(want) == 0 {
		return []string{"empty report"}
	}
	if strings.Join(got[0], ",") != strings.Join(want[0], ",") {
		return []string{fmt.Sprintf("header %v, want %v", got[0], want[0])}
	}
	if len(got) != len(want) {
		diffs = append(diffs, fmt.Sprintf("%d rows, want %d", len(got)-1, len(want)-1))
	}
	tol := tolerances(interval)
	for i := 1; i < min(len(got), len(want)); i++ {
		for j, col := range want[0] {
			g, w := got[i][j], want[i][j]
			if g == w {
				continue
			}
			tl := tol[col]
			if tl.exact || g == "" || w == "" {
				diffs = append(diffs, fmt.Sprintf("row %d (%s) %s: %q, want %q", i, want[i][0], col, g, w))
				continue
			}
			gf, err1 := strconv.ParseFloat(g, 64)
			wf, err2 := strconv.ParseFloat(w, 64)
			if err1 != nil || err2 != nil {
				diffs = append(diffs, fmt.Sprintf("row %d (%s) %s: %q, want %q", i, want[i][0], col, g, w))
				continue
			}
			if math.Abs(gf-wf) > tl.abs+tl.rel*math.Abs(wf) {
				diffs = append(diffs, fmt.Sprintf("row %d (%s) %s: %s, want %s (±%g%s)", i, want[i][0], col, g, w, tl.abs, relNote(tl.rel)))
			}
		}
	}
	return diffs
}

func relNote(rel float64) string {
	if rel == 0 {
		return ""
	}
	return fmt.Sprintf(" +%g%%", rel*100)
}

func TestCompareReports(t *testing.T) {
	want := [][]string{{"tenant", "cost", "jitter_p99_ms", "cold_start_breaches"}, {"a", "1.000000", "4.060", "1"}}
	tests := []struct {
		got  []string
		ok   bool
		name string
	}{
		{[]string{"a", "1.000000", "4.060", "1"}, true, "equal"},
		{[]string{"a", "1.000001", "4.100", "1"}, true, "within"},
		{[]string{"a", "1.000003", "4.060", "1"}, false, "money off"},
		{[]string{"a", "1.000000", "4.200", "1"}, false, "jitter off"},
		{[]string{"a", "1.000000", "4.060", "2"}, false, "breaches off"},
		{[]string{"a", "1.000000", "", "1"}, false, "empty vs value"},
	}
	for _, tt := range tests {
		d := compareReports([][]string{want[0], tt.got}, want, 0.1)
		if (len(d) == 0) != tt.ok {
			t.Errorf("%s: diffs %v, ok want %v", tt.name, d, tt.ok)
		}
	}
}
