package allocation

import (
	"fmt"
	"time"
)

// Overlaps returns a reason for every pair of different allocations that hold one instance at
// the same time, naming both. incoming are checked against each other and against current.
func Overlaps(incoming, current []Allocation) []error {
	byTarget := map[string][]Allocation{}
	replaced := map[string]bool{}
	for _, a := range incoming {
		replaced[a.ID] = true
	}
	for _, a := range current {
		if !replaced[a.ID] { // an incoming version of it replaces it
			byTarget[a.Target()] = append(byTarget[a.Target()], a)
		}
	}
	var errs []error
	for _, a := range incoming {
		for _, b := range byTarget[a.Target()] {
			if err := overlap(a, b); err != nil {
				errs = append(errs, err)
			}
		}
		byTarget[a.Target()] = append(byTarget[a.Target()], a)
	}
	return errs
}

// overlap is the reason a may not hold its instance while b does, naming both; nil when they
// are one allocation (a version of it replaces the other), on different instances, or one
// ends before the other starts.
func overlap(a, b Allocation) error {
	if a.ID == b.ID || a.Target() != b.Target() || !a.StartedAt.Before(b.end()) || !b.StartedAt.Before(a.end()) {
		return nil
	}
	return fmt.Errorf("allocation %q of tenant %q [%s, %s) overlaps allocation %q of tenant %q [%s, %s) on %s",
		a.ID, a.Tenant, stamp(a.StartedAt), stamp(a.EndedAt), b.ID, b.Tenant, stamp(b.StartedAt), stamp(b.EndedAt), a.Target())
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "running"
	}
	return t.UTC().Format(time.RFC3339Nano)
}
