// Package expected compares a report printed as CSV with a scenario's expected report, within
// the tolerances of the scenario checks (schemas/README.md, "Scenario files"), for every test that runs a
// public scenario.
package expected

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// tolerance is |got − want| ≤ abs + rel·|want| + costRel·(the row's cost).
type tolerance struct {
	abs, rel, costRel float64
	exact             bool
}

// Tolerances of the scenario checks: money and seconds ±1e-6 (relative 1e-6 on money);
// efficiency ±0.5 %; waste and overhead ±(0.5 % of the expected value + 0.01 % of the tenant's
// cost), since a discrete scheduler may give one vGPU a slice more than another within a
// minute; jitter ±2 %; cold start ±1 sampling interval; unmetered ±2 intervals; breaches
// exact. Printed values are rounded, so one unit in the last printed place is allowed on top
// where the tolerance is below it.
func tolerances(interval float64) map[string]tolerance {
	money := tolerance{abs: 1e-6 + 1e-9, rel: 1e-6}
	return map[string]tolerance{
		"tenant": {exact: true}, "tier": {exact: true}, "window_start": {exact: true}, "window_end": {exact: true},
		"currency": {exact: true}, "cold_start_breaches": {exact: true},
		"allocated_seconds": {abs: 1e-3 + 1e-9}, // printed with 3 decimals
		"list_cost":         money, "cost": money,
		"waste_cost":        {abs: 1e-6 + 1e-9, rel: 0.005, costRel: 1e-4},
		"overhead_cost":     {abs: 1e-6 + 1e-9, rel: 0.005, costRel: 1e-4},
		"efficiency":        {abs: 1e-4 + 1e-9, rel: 0.005},
		"jitter_p99_ms":     {abs: 1e-3 + 1e-9, rel: 0.02},
		"cold_start_max_s":  {abs: interval + 1e-9},
		"unmetered_seconds": {abs: 2*interval + 1e-9},
	}
}

// Compare returns every difference between got and want (CSV rows, header first) beyond the
// tolerances; interval is the scenario's sampling interval in seconds.
func Compare(got, want [][]string, interval float64) []string {
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
	costCol := -1
	for j, col := range want[0] {
		if col == "cost" {
			costCol = j
		}
	}
	tol := tolerances(interval)
	for i := 1; i < min(len(got), len(want)); i++ {
		cost := 0.0
		if costCol >= 0 {
			cost, _ = strconv.ParseFloat(want[i][costCol], 64)
		}
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
			if math.Abs(gf-wf) > tl.abs+tl.rel*math.Abs(wf)+tl.costRel*math.Abs(cost) {
				diffs = append(diffs, fmt.Sprintf("row %d (%s) %s: %s, want %s (±%g%s)", i, want[i][0], col, g, w, tl.abs, relNote(tl)))
			}
		}
	}
	return diffs
}

func relNote(tl tolerance) string {
	s := ""
	if tl.rel != 0 {
		s += fmt.Sprintf(" +%g%%", tl.rel*100)
	}
	if tl.costRel != 0 {
		s += fmt.Sprintf(" +%g%% of cost", tl.costRel*100)
	}
	return s
}
