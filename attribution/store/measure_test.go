package store

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/internal/chquery"
)

var t0 = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC).UnixNano()

func at(d time.Duration) int64 { return t0 + int64(d) }

func TestChunks(t *testing.T) {
	allocs := func(n int, billed time.Duration) []billing.Billed {
		out := make([]billing.Billed, n)
		for i := range out {
			out[i] = billing.Billed{Allocation: billing.Allocation{ID: fmt.Sprint(i)}, Billed: billing.Interval{Start: at(0), End: at(billed)}}
		}
		return out
	}
	long := func(bs []billing.Billed) []billing.Billed {
		for i := range bs {
			bs[i].Target.Node = strings.Repeat("n", 1<<20)
		}
		return bs
	}
	tests := []struct {
		name          string
		billed        []billing.Billed
		rowsPerSecond float64
		want          []int // chunk lengths
	}{
		{"none", nil, 1, nil},
		{"a minute of 1000: one chunk", allocs(1000, time.Minute), 1, []int{1000}},
		{"a minute of 50,000: one chunk", allocs(50_000, time.Minute), 1, []int{50_000}},
		{"a minute of 150,000: maxChunkAllocations", allocs(150_000, time.Minute), 1, []int{100_000, 50_000}},
		// 8M rows / 86400 rows a day = 92 targets a chunk.
		{"a day from samples_1s: the row budget", allocs(200, 24*time.Hour), 1, []int{92, 92, 16}},
		// 8M rows / 1440 rows a day = 5555 targets a chunk.
		{"a day from samples_1m", allocs(6000, 24*time.Hour), 1.0 / 60, []int{5555, 445}},
		{"one over the budget alone", allocs(2, 24*time.Hour), 100, []int{1, 1}},
		// Nodes of 1 MiB: over 4 MiB of text each, 15 in 64 MiB.
		{"the text budget", long(allocs(40, time.Minute)), 1, []int{15, 15, 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []int
			total := 0
			for _, c := range chunks(tt.billed, tt.rowsPerSecond) {
				got = append(got, len(c))
				for i, b := range c {
					if b.ID != fmt.Sprint(total+i) {
						t.Fatalf("chunk out of order: %s at %d", b.ID, total+i)
					}
				}
				total += len(c)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("chunk lengths %v, want %v", got, tt.want)
			}
		})
	}
}

// TestFirstAttachedArgs: the searches are grouped by start (within searchGroupSpan), one UNION
// ALL branch per group over the group's range and distinct targets; the search table lists
// every search with its own range.
func TestFirstAttachedArgs(t *testing.T) {
	q, _ := SecondRollup.queries()
	n := func(i int) billing.Target { return billing.Target{Node: "node-a", Instance: fmt.Sprintf("gpu%d", i)} }
	search := func(id string, tg billing.Target, from, to time.Duration) coldStartSearch {
		return coldStartSearch{id, tg, billing.Interval{Start: at(from), End: at(to)}}
	}
	tests := []struct {
		name     string
		searches []coldStartSearch
		groups   []billing.Interval
		targets  [][]string // per group, the instances
	}{
		{
			"one group",
			[]coldStartSearch{search("a", n(0), 0, 15*time.Minute), search("b", n(1), time.Minute, 16*time.Minute), search("c", n(0), 50*time.Minute, 51*time.Minute)},
			[]billing.Interval{{Start: at(0), End: at(51 * time.Minute)}},
			[][]string{{"gpu0", "gpu1"}},
		},
		{
			"hours apart, unsorted",
			[]coldStartSearch{search("late", n(2), 5*time.Hour, 5*time.Hour+15*time.Minute), search("a", n(0), 0, 15*time.Minute),
				search("b", n(1), 59*time.Minute, 74*time.Minute), search("c", n(3), 60*time.Minute, 61*time.Minute)},
			[]billing.Interval{{Start: at(0), End: at(74 * time.Minute)}, {Start: at(60 * time.Minute), End: at(61 * time.Minute)}, {Start: at(5 * time.Hour), End: at(5*time.Hour + 15*time.Minute)}},
			[][]string{{"gpu0", "gpu1"}, {"gpu3"}, {"gpu2"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			query, args := firstAttachedArgs(q, tt.searches)
			if got := strings.Count(query, "UNION ALL") + 1; got != len(tt.groups) {
				t.Fatalf("%d branches, want %d:\n%s", got, len(tt.groups), query)
			}
			if strings.Contains(query, "{{") {
				t.Errorf("unreplaced placeholder:\n%s", query)
			}
			if got, want := strings.Count(query, "?"), len(args); got != want {
				t.Errorf("%d placeholders, %d arguments", got, want)
			}
			for i, g := range tt.groups {
				branch := args[6*i : 6*i+6]
				want := []any{chquery.Seconds(g.Start), chquery.Seconds(g.End), g.Start, g.End}
				if fmt.Sprint(branch[:4]) != fmt.Sprint(want) || branch[5] != chquery.PackStrings(tt.targets[i]) {
					t.Errorf("group %d: %v, want range %v and instances %v", i, branch, want, tt.targets[i])
				}
			}
			ids := args[6*len(tt.groups)]
			if strings.Count(ids.(string), ",")+1 != len(tt.searches) {
				t.Errorf("search table %v, want every search", ids)
			}
		})
	}
}
