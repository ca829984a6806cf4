package store

import (
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/billing"
)

// The rules of ColdStarts: an answer is remembered only when older than the pass's bound, and
// reused only for the same allocation, target and requested_at, in a window that ends after it;
// entries no report used for keepPasses passes are dropped, and Forget drops all.
func TestColdStartsRules(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	ns := func(d time.Duration) int64 { return t0.Add(d).UnixNano() }
	target := billing.Target{Node: "node-a", Instance: "gpu0/mig0"}
	billed := func(id string, tg billing.Target, requested, end time.Duration) billing.Billed {
		return billing.Billed{Allocation: billing.Allocation{ID: id, Target: tg, Requested: ns(requested)},
			Billed: billing.Interval{Start: ns(end - time.Minute), End: ns(end)}}
	}
	a := billed("a", target, -3*time.Hour, 0)
	for _, tc := range []struct {
		name  string
		first time.Duration // remembered for a
		ask   billing.Billed
		want  bool
	}{
		{"same allocation, later window", -3*time.Hour + 12*time.Second, a, true},
		{"after the bound: not remembered", -5 * time.Minute, a, false},
		{"another target", -3*time.Hour + 12*time.Second, billed("a", billing.Target{Node: "node-a", Instance: "gpu0/mig1"}, -3*time.Hour, 0), false},
		{"another requested_at", -3*time.Hour + 12*time.Second, billed("a", target, -2*time.Hour, 0), false},
		{"another allocation", -3*time.Hour + 12*time.Second, billed("b", target, -3*time.Hour, 0), false},
		{"a window that ends before it", -2 * time.Hour, billed("a", target, -3*time.Hour, -150*time.Minute), false},
		{"a window that ends at it", -2 * time.Hour, billed("a", target, -3*time.Hour, -2*time.Hour), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewColdStarts()
			c.Pass(t0.Add(-10 * time.Minute))
			c.remember(a, ns(tc.first))
			got, ok := c.lookup(tc.ask)
			if ok != tc.want || ok && got != ns(tc.first) {
				t.Errorf("lookup: %v, %v; want %v", time.Unix(0, got).UTC(), ok, tc.want)
			}
		})
	}

	var none *ColdStarts
	none.Pass(t0)
	none.remember(a, ns(-3*time.Hour))
	if _, ok := none.lookup(a); ok || none.Len() != 0 {
		t.Error("a nil ColdStarts remembered something")
	}

	c := NewColdStarts()
	c.Pass(t0)
	c.remember(a, ns(-3*time.Hour))
	for pass := 1; pass <= keepPasses; pass++ {
		c.Pass(t0)
		if c.Len() != 1 {
			t.Fatalf("dropped after %d passes without use, want kept for %d", pass, keepPasses)
		}
	}
	if _, ok := c.lookup(a); !ok {
		t.Fatal("not found while kept")
	}
	for range keepPasses + 1 {
		c.Pass(t0)
	}
	if c.Len() != 0 {
		t.Errorf("%d entries kept %d passes after their last use", c.Len(), keepPasses+1)
	}
	c.remember(a, ns(-3*time.Hour))
	c.Forget()
	if c.Len() != 0 {
		t.Error("Forget kept entries")
	}
}
