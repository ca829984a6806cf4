package allocation

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// sequential is n allocations back to back on targets instances: none overlaps.
func sequential(n, targets int) []Allocation {
	t0 := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	out := make([]Allocation, n)
	for i := range out {
		start := t0.Add(time.Duration(i/targets) * time.Hour)
		out[i] = Allocation{ID: fmt.Sprintf("a%d", i), Tenant: "t", Tier: "pro", Node: "n", Instance: fmt.Sprintf("gpu%d", i%targets),
			RequestedAt: start, StartedAt: start, EndedAt: start.Add(time.Hour)}
	}
	return out
}

// TestFirstOverlapMany: among 100,000 allocations on 70 instances, the first conflict in
// input order is the one reported, whether it is with a current allocation or an earlier
// incoming one, and however many later ones conflict too.
func TestFirstOverlapMany(t *testing.T) {
	all := sequential(110_000, 70)
	clash := func(a Allocation, id string, shift time.Duration) Allocation {
		a.ID, a.StartedAt, a.RequestedAt = id, a.StartedAt.Add(shift), a.RequestedAt.Add(shift)
		a.EndedAt = a.EndedAt.Add(shift)
		return a
	}
	tests := []struct {
		name string
		edit func(incoming []Allocation) // overwrites some incoming allocations
		want string                      // the ids the reason names, in order
	}{
		{"none", func([]Allocation) {}, ""},
		{"with a current one", func(in []Allocation) {
			in[90_000] = clash(all[5_000], "late", 30*time.Minute) // also overlaps all[5_070], incoming
			in[60_000] = clash(all[100], "early", 0)               // the first
		}, `"early" of tenant "t" [2026-01-05T01:00:00Z, 2026-01-05T02:00:00Z) overlaps allocation "a100"`},
		{"with an earlier incoming one", func(in []Allocation) {
			in[99_999] = clash(in[50_000], "last", time.Minute)
			in[70_000] = clash(in[40_000], "middle", -time.Minute) // overlaps in[40_000] and the one before it
		}, `"middle" of tenant "t" [2026-02-03T17:59:00Z, 2026-02-03T18:59:00Z) overlaps allocation "a49930"`},
		{"a running one", func(in []Allocation) {
			in[5].EndedAt = time.Time{} // a10005 runs on: a10075, 70 later, is the first to clash
		}, `"a10075" of tenant "t" [2026-01-10T23:00:00Z, 2026-01-11T00:00:00Z) overlaps allocation "a10005" of tenant "t" [2026-01-10T22:00:00Z, running)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			incoming := append([]Allocation(nil), all[10_000:]...)
			tt.edit(incoming)
			err := FirstOverlap(incoming, all[:10_000])
			if (err == nil) != (tt.want == "") || err != nil && !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want %q", err, tt.want)
			}
		})
	}
}

// TestFirstOverlapAgreesWithPairwise: on random small inputs the sweep reports exactly what
// checking every pair reports first.
func TestFirstOverlapAgreesWithPairwise(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	t0 := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	random := func(id string) Allocation {
		start := t0.Add(time.Duration(r.IntN(40)) * time.Minute)
		a := Allocation{ID: id, Tenant: "t", Tier: "pro", Node: "n", Instance: fmt.Sprintf("gpu%d", r.IntN(3)), RequestedAt: start, StartedAt: start}
		if r.IntN(5) > 0 {
			a.EndedAt = start.Add(time.Duration(1+r.IntN(10)) * time.Minute)
		}
		return a
	}
	for round := range 5000 {
		var incoming, current []Allocation
		for i := range r.IntN(8) {
			current = append(current, random(fmt.Sprintf("c%d", i)))
		}
		for i := range r.IntN(8) {
			id := fmt.Sprintf("i%d", i)
			if r.IntN(4) == 0 { // a new version of a current one
				id = fmt.Sprintf("c%d", i)
			}
			incoming = append(incoming, random(id))
		}
		fast, slow := FirstOverlap(incoming, current), firstOverlapPairwise(incoming, current)
		if fmt.Sprint(fast) != fmt.Sprint(slow) {
			t.Fatalf("round %d: %v, pairwise %v\nincoming %v\ncurrent %v", round, fast, slow, incoming, current)
		}
	}
}

// BenchmarkFirstOverlap checks 100,000 allocations on 70 targets against 10,000 current ones
// (35 s pairwise).
func BenchmarkFirstOverlap(b *testing.B) {
	all := sequential(110_000, 70)
	current, incoming := all[:10_000], all[10_000:]
	for b.Loop() {
		if err := FirstOverlap(incoming, current); err != nil {
			b.Fatal(err)
		}
	}
}
