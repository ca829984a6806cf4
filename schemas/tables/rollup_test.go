package tables_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// TestSweep runs tables.Sweep on ClickHouse 18.16: the measure of the union of the intervals
// and the integral over it of the mean value of the intervals covering each instant.
func TestSweep(t *testing.T) {
	conn := localtest.Database(t, localtest.DatabaseOptions{}).Conn
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name            string
		starts, ends    []int64
		values          []float64
		union, integral float64
	}{
		{"none", nil, nil, nil, 0, 0},
		{"one", []int64{10}, []int64{30}, []float64{0.5}, 20, 10},
		{"disjoint", []int64{0, 50}, []int64{10, 60}, []float64{1, 0.5}, 20, 15},
		{"touching", []int64{0, 10}, []int64{10, 20}, []float64{1, 0}, 20, 10},
		// [0, 10) at 1, [10, 15) at (1 + 0) / 2, [15, 20) at 1.
		{"overlapping", []int64{0, 10}, []int64{20, 15}, []float64{1, 0}, 20, 17.5},
		{"duplicate", []int64{5, 5}, []int64{15, 15}, []float64{0.2, 0.4}, 10, 3},
		// A clock step back by 5 of 10-long samples: [0, 10), [10, 20), [15, 25), [25, 35).
		{"clock step", []int64{0, 10, 15, 25}, []int64{10, 20, 25, 35}, []float64{1, 1, 1, 1}, 35, 35},
		{"unordered", []int64{30, 0}, []int64{40, 10}, []float64{1, 1}, 20, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			arr := func(xs any) string {
				s := strings.ReplaceAll(strings.Trim(fmt.Sprint(xs), "[]"), " ", ", ")
				return "[" + s + "]"
			}
			q := fmt.Sprintf(`SELECT toFloat64(u_union), u_integral FROM (
    SELECT arrayMap(x -> toInt64(x), CAST(%s AS Array(Int64))) AS s, arrayMap(x -> toInt64(x), CAST(%s AS Array(Int64))) AS e,
        arrayMap(x -> toFloat64(x), CAST(%s AS Array(Float64))) AS v, %s)`,
				arr(tc.starts), arr(tc.ends), arr(tc.values), tables.Sweep("u", "s", "e", "v"))
			var union, integral float64
			if err := conn.QueryRow(ctx, q).Scan(&union, &integral); err != nil {
				t.Fatalf("%v\n%s", err, q)
			}
			if union != tc.union || math.Abs(integral-tc.integral) > 1e-9 {
				t.Errorf("union %v, integral %v; want %v, %v", union, integral, tc.union, tc.integral)
			}
		})
	}
}

// TestCoverage checks that tables.Coverage gives Sweep's answers whether or not it sweeps.
func TestCoverage(t *testing.T) {
	conn := localtest.Database(t, localtest.DatabaseOptions{}).Conn
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name            string
		starts, ends    string
		regular         bool
		union, integral float64
	}{
		{"regular", "[30, 0, 10]", "[40, 10, 20]", true, 30, 15},
		{"disjoint, swept", "[30, 0, 10]", "[40, 10, 20]", false, 30, 15},
		{"overlap", "[0, 5]", "[10, 15]", false, 15, 7.5},
		{"nested", "[0, 2]", "[10, 4]", false, 10, 5},
		{"none", "[]", "[]", true, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := fmt.Sprintf(`SELECT toFloat64(c_union), c_integral FROM (
    SELECT *, %s FROM (
        SELECT CAST(%s AS Array(Int64)) AS s, CAST(%s AS Array(Int64)) AS e, %d = 1 AS reg,
            arrayMap(x -> 0.5, s) AS v, arraySum(arrayMap((a, b) -> b - a, s, e)) AS len, len * 0.5 AS w))`,
				tables.Coverage("c", "s", "e", "v", "len", "w", "reg"), tc.starts, tc.ends, map[bool]int{true: 1}[tc.regular])
			var union, integral float64
			if err := conn.QueryRow(ctx, q).Scan(&union, &integral); err != nil {
				t.Fatalf("%v\n%s", err, q)
			}
			if union != tc.union || math.Abs(integral-tc.integral) > 1e-9 {
				t.Errorf("union %v, integral %v; want %v, %v", union, integral, tc.union, tc.integral)
			}
		})
	}
}
