package allocation

import (
	"strings"
	"testing"
	"time"
)

func TestOverlaps(t *testing.T) {
	at := func(m int) time.Time { return time.Date(2026, 1, 5, 0, m, 0, 0, time.UTC) }
	alloc := func(id, tenant, inst string, from, to int) Allocation {
		a := Allocation{ID: id, Tenant: tenant, Tier: "pro", Node: "n", Instance: inst, RequestedAt: at(from), StartedAt: at(from)}
		if to >= 0 {
			a.EndedAt = at(to)
		}
		return a
	}
	tests := []struct {
		name              string
		incoming, current []Allocation
		want              []string // each a reason that must name both
	}{
		{"back to back", []Allocation{alloc("b", "beta", "gpu0", 10, 20)}, []Allocation{alloc("a", "acme", "gpu0", 0, 10)}, nil},
		{"other instance", []Allocation{alloc("b", "beta", "gpu1", 0, 20)}, []Allocation{alloc("a", "acme", "gpu0", 0, 20)}, nil},
		{"overlap", []Allocation{alloc("b", "beta", "gpu0", 5, 20)}, []Allocation{alloc("a", "acme", "gpu0", 0, 10)}, []string{`"b" of tenant "beta"`, `"a" of tenant "acme"`, "n/gpu0"}},
		{"running one", []Allocation{alloc("b", "beta", "gpu0", 30, 40)}, []Allocation{alloc("a", "acme", "gpu0", 0, -1)}, []string{`"a"`, "running"}},
		{"within the batch", []Allocation{alloc("a", "acme", "gpu0", 0, 10), alloc("b", "beta", "gpu0", 9, 12)}, nil, []string{`"b"`, `"a"`}},
		{"a new version replaces", []Allocation{alloc("a", "acme", "gpu0", 20, 30)}, []Allocation{alloc("a", "acme", "gpu0", 0, 25)}, nil},
		{"moved away", []Allocation{alloc("a", "acme", "gpu1", 0, 10), alloc("b", "beta", "gpu0", 0, 10)}, []Allocation{alloc("a", "acme", "gpu0", 0, 10)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := FirstOverlap(tt.incoming, tt.current)
			if len(tt.want) == 0 {
				if err != nil {
					t.Errorf("unexpected: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no overlap found, want one")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v should contain %q", err, w)
				}
			}
		})
	}
}
