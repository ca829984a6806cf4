package store

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/billing"
)

// TestMinuteNeedsBranches: the whole minutes of samples_1m are read in branches of whole UTC
// days that cover every second once (a row's copies, sharing its time, fall in one branch),
// each bound with the chunk's dedup arguments, and the query has a branch per bound pair.
func TestMinuteNeedsBranches(t *testing.T) {
	const day = int64(24 * time.Hour)
	tests := []struct {
		name     string
		start    time.Duration // from t0, a Monday's midnight
		length   time.Duration
		branches int
	}{
		{"an hour inside a day: the day and the one the lookback reaches", time.Hour, time.Hour, 1},
		{"an hour from midnight: the lookback reaches the day before", 0, time.Hour, 2},
		{"a week from midnight", 0, 7 * 24 * time.Hour, 8},
		{"90 days: 8 branches of 12 days", 0, 90 * 24 * time.Hour, 8},
	}
	q, err := MinuteRollup.queries()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chunk := []billing.Billed{{Allocation: billing.Allocation{ID: "a", Target: billing.Target{Node: "n", Instance: "i"}},
				Billed: billing.Interval{Start: at(tt.start), End: at(tt.start + tt.length)}}}
			span, args := usageArgs(q, chunk)
			query, out := minuteNeeds(chunk, span, args)
			if got := strings.Count(query, "FROM samples_1m FINAL"); got != tt.branches {
				t.Fatalf("%d FINAL branches in the query, want %d", got, tt.branches)
			}
			if len(out) != len(args)+tt.branches*8-6 {
				t.Fatalf("%d arguments, want %d: the chunk's %d, and 8 a branch instead of its first 6", len(out), len(args)+tt.branches*8-6, len(args))
			}
			var prev int64
			for i := range tt.branches {
				b := out[i*8 : i*8+8]
				for j := range 6 {
					if !reflect.DeepEqual(b[j], args[j]) {
						t.Fatalf("branch %d argument %d = %v, want the chunk's %v", i, j, b[j], args[j])
					}
				}
				lo, hi := b[6].(int64), b[7].(int64)
				if lo != prev || hi <= lo || (i < tt.branches-1 && hi%(day/int64(time.Second)) != 0) {
					t.Fatalf("branch %d: [%d, %d) after %d: want contiguous whole days", i, lo, hi, prev)
				}
				prev = hi
			}
			if prev != math.MaxUint32 {
				t.Fatalf("the last branch ends at %d, want %d (open to the future)", prev, int64(math.MaxUint32))
			}
			for i, a := range out[tt.branches*8:] {
				if !reflect.DeepEqual(a, args[6+i]) {
					t.Fatalf("argument %d after the branches = %v, want the chunk's %v", i, a, args[6+i])
				}
			}
		})
	}
}
