// Package intake takes tenants' allocations in over HTTP and from files: it decodes and
// validates them, refuses overlaps on an instance, and stores them in ClickHouse's allocations
// table, idempotently by allocation id. The Kafka topic is consumed by the collector, which
// stores the events itself; CheckEvents gives it the same overlap rule.
package intake

import (
	"fmt"
	"strings"
	"time"
)

// Allocation is DESIGN.md's allocation: a tenant holds a target (node + instance id) at a tier
// from StartedAt (billing starts) to EndedAt (zero: still running).
type Allocation struct {
	ID          string    `json:"allocation_id"`
	Tenant      string    `json:"tenant"`
	Tier        string    `json:"tier"`
	Node        string    `json:"node"`
	Instance    string    `json:"instance_id"`
	RequestedAt time.Time `json:"requested_at"`
	StartedAt   time.Time `json:"started_at"`
	EndedAt     time.Time `json:"ended_at"` // zero: still running; JSON null or absent
}

// Target is the allocation's node/instance.
func (a Allocation) Target() string { return a.Node + "/" + a.Instance }

// end is EndedAt, or the end of time for a running allocation.
func (a Allocation) end() time.Time {
	if a.EndedAt.IsZero() {
		return time.Unix(1<<62, 0)
	}
	return a.EndedAt
}

// same reports whether two allocations say the same thing (a repeat is not a change).
func (a Allocation) same(b Allocation) bool {
	return a.ID == b.ID && a.Tenant == b.Tenant && a.Tier == b.Tier && a.Node == b.Node && a.Instance == b.Instance &&
		a.RequestedAt.Equal(b.RequestedAt) && a.StartedAt.Equal(b.StartedAt) && a.EndedAt.Equal(b.EndedAt)
}

// Error is one thing wrong with an allocation in an input: where (source and line, or the
// index in a request), which field, the value and what was expected.
type Error struct {
	Source   string // file name or "request"
	Line     int    // 0 when not known
	Field    string // empty for the whole record
	Value    string
	Expected string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Source)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, ": %s", e.Field)
	}
	fmt.Fprintf(&b, ": %s; expected %s", e.Value, e.Expected)
	return b.String()
}

// validate checks one allocation; source and line say where it came from.
func (a Allocation) validate(source string, line int) error {
	fail := func(field, value, expected string) error {
		return &Error{Source: source, Line: line, Field: field, Value: value, Expected: expected}
	}
	for _, f := range []struct{ name, value string }{
		{"allocation_id", a.ID}, {"tenant", a.Tenant}, {"tier", a.Tier}, {"node", a.Node}, {"instance_id", a.Instance},
	} {
		if strings.TrimSpace(f.value) == "" {
			return fail(f.name, "empty", "a non-empty name")
		}
	}
	switch {
	case a.StartedAt.IsZero():
		return fail("started_at", "missing", "an RFC 3339 time when the instance was ready (billing starts)")
	case a.RequestedAt.IsZero():
		return fail("requested_at", "missing", "an RFC 3339 time when the tenant asked for the instance")
	case a.StartedAt.Before(a.RequestedAt):
		return fail("started_at", a.StartedAt.Format(time.RFC3339Nano), "a time at or after requested_at "+a.RequestedAt.Format(time.RFC3339Nano))
	case !a.EndedAt.IsZero() && !a.EndedAt.After(a.StartedAt):
		return fail("ended_at", a.EndedAt.Format(time.RFC3339Nano), "a time after started_at "+a.StartedAt.Format(time.RFC3339Nano)+", or null while running")
	}
	return nil
}

// overlaps returns a reason for every pair of different allocations that hold one instance at
// the same time, naming both. incoming are checked against each other and against current.
func overlaps(incoming, current []Allocation) []error {
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
