// Package allocation is the allocation contract every component shares: the record (a tenant
// holding an instance at a tier for a time), its validation, its one JSON wire form, and the
// overlap rule (no two live allocations hold one instance at the same time), also for the
// events of the slicemeter.allocations.v1 topic checked against the allocations table.
//
// It sits below the collector and attribution in the data flow, so both import it and neither
// imports the other.
package allocation

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/slicemeter/slicemeter/schemas/validate"
)

// Fields are the names of an allocation's fields on the wire: JSON keys, and the CSV header
// of an allocations file, in this order.
var Fields = []string{"allocation_id", "tenant", "tier", "node", "instance_id", "requested_at", "started_at", "ended_at"}

// Allocation is a tenant holding a target (node + instance id) at a tier from StartedAt
// (billing starts) to EndedAt (zero: still running).
type Allocation struct {
	ID          string
	Tenant      string
	Tier        string
	Node        string
	Instance    string
	RequestedAt time.Time
	StartedAt   time.Time
	EndedAt     time.Time // zero: still running
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

// Same reports whether two allocations say the same thing (a repeat is not a change).
func (a Allocation) Same(b Allocation) bool {
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
	// Reason is the validator's reason code (validate.Reason*) when the validator refused the
	// allocation; empty when the input could not be read as allocations at all.
	Reason string
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

// Validate checks one allocation; source and line say where it came from (an *Error names them).
func (a Allocation) Validate(source string, line int) error {
	fail := func(field, value, expected, reason string) error {
		return &Error{Source: source, Line: line, Field: field, Value: value, Expected: expected, Reason: reason}
	}
	v := validate.Allocation{ID: a.ID, Tenant: a.Tenant, Tier: a.Tier, Node: a.Node, InstanceID: a.Instance}
	if r := validate.CheckAllocationNames(v); r != nil {
		return fail(r.Field, r.Value, r.Expected, r.Reason)
	}
	// The range first, on the times themselves: their nanoseconds wrap after 2262 (a start in
	// 2610 became one in 2026), so a check of the nanoseconds comes too late.
	for i, t := range []time.Time{a.RequestedAt, a.StartedAt, a.EndedAt} {
		if t.IsZero() {
			continue
		}
		if r := validate.CheckTime(Fields[5+i], t.Format(time.RFC3339Nano), t); r != nil {
			return fail(r.Field, r.Value, r.Expected, r.Reason)
		}
	}
	v.RequestedAtNs, v.StartedAtNs, v.EndedAtNs = ToNS(a.RequestedAt), ToNS(a.StartedAt), ToNS(a.EndedAt)
	// Files and requests must say when the allocation was asked for and started; a topic
	// event may leave them 0 (validate.CheckAllocation).
	switch {
	case a.StartedAt.IsZero():
		return fail("started_at", "missing", "an RFC 3339 time when the instance was ready (billing starts)", validate.ReasonInvalid)
	case a.RequestedAt.IsZero():
		return fail("requested_at", "missing", "an RFC 3339 time when the tenant asked for the instance", validate.ReasonInvalid)
	}
	if r := validate.CheckAllocationTimes(v); r != nil {
		return fail(r.Field, r.Value, r.Expected, r.Reason)
	}
	return nil
}

// FromNS is the time of a stored or published nanosecond timestamp; 0 is the zero time
// (not yet started, still running).
func FromNS(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// ToNS is FromNS reversed: the zero time is 0. A time that int64 nanoseconds cannot hold
// (after 2262-04-11, before 1677-09-21) saturates to the largest or smallest int64 instead of
// wrapping into another year: Validate refuses such a time, but what is written anyway (a dead
// letter) must not read back as a valid-looking one.
func ToNS(t time.Time) int64 {
	switch {
	case t.IsZero():
		return 0
	case t.After(maxNS):
		return math.MaxInt64
	case t.Before(minNS):
		return math.MinInt64
	}
	return t.UnixNano()
}

var maxNS, minNS = time.Unix(0, math.MaxInt64), time.Unix(0, math.MinInt64)
