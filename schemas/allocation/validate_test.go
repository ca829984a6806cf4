package allocation

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/schemas/validate"
)

// TestValidateChecksTimesBeforeNanoseconds: Validate, which every door that builds an
// Allocation from times calls (the decoders, the Kubernetes discovery), refuses a time outside
// 2000-01-01..2106-02-07 naming the field and quoting the time, never a wrapped one: UnixNano
// of 2610-08-01 is 2026-01-10T00:25:26Z, and of 9999-12-31 lies in 1816.
func TestValidateChecksTimesBeforeNanoseconds(t *testing.T) {
	at := func(s string) time.Time {
		ts, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	valid := func() Allocation {
		return Allocation{ID: "a1", Tenant: "acme", Tier: "pro", Node: "node-a", Instance: "gpu0",
			RequestedAt: at("2026-01-05T00:00:00Z"), StartedAt: at("2026-01-05T00:00:10Z")}
	}
	for _, tc := range []struct {
		name         string
		mutate       func(*Allocation)
		field, value string // empty: valid
	}{
		{"valid", func(*Allocation) {}, "", ""},
		{"to the last second of 2106-02-07T06:28:15", func(a *Allocation) { a.EndedAt = at("2106-02-07T06:28:15.999999999Z") }, "", ""},
		{"started in 2610", func(a *Allocation) {
			a.RequestedAt, a.StartedAt = at("2610-08-01T00:00:00Z"), at("2610-08-01T00:00:00Z")
		}, "requested_at", "2610-08-01T00:00:00Z"},
		{"started in 9999", func(a *Allocation) { a.StartedAt = at("9999-12-31T00:00:00Z") }, "started_at", "9999-12-31T00:00:00Z"},
		{"ended in 2610", func(a *Allocation) { a.EndedAt = at("2610-09-01T00:00:00Z") }, "ended_at", "2610-09-01T00:00:00Z"},
		{"ended just after 2106", func(a *Allocation) { a.EndedAt = at("2106-02-07T06:28:16Z") }, "ended_at", "2106-02-07T06:28:16Z"},
		{"requested in 1999", func(a *Allocation) { a.RequestedAt = at("1999-12-31T23:59:59Z") }, "requested_at", "1999-12-31T23:59:59Z"},
		{"requested in 1500 (UnixNano wraps below 1678)", func(a *Allocation) { a.RequestedAt = at("1500-01-01T00:00:00Z") }, "requested_at", "1500-01-01T00:00:00Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := valid()
			tc.mutate(&a)
			err := a.Validate("kubernetes", 0)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Field != tc.field || e.Reason != validate.ReasonInvalid || !strings.Contains(e.Value, tc.value) ||
				!strings.Contains(e.Expected, "2106-02-07T06:28:15Z") {
				t.Errorf("got %#v, want %s refused quoting %s and the range", err, tc.field, tc.value)
			}
		})
	}
}

// TestToNSSaturates: a time int64 nanoseconds cannot hold becomes the extreme int64 (which the
// validator refuses), never a time of another year (UnixNano of 2610-08-01 is in 2026).
func TestToNSSaturates(t *testing.T) {
	for _, tc := range []struct {
		t    time.Time
		want int64
	}{
		{time.Time{}, 0},
		{time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC).UnixNano()},
		{time.Unix(0, math.MaxInt64), math.MaxInt64},
		{time.Date(2610, 8, 1, 0, 0, 0, 0, time.UTC), math.MaxInt64},
		{time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), math.MaxInt64},
		{time.Unix(0, math.MinInt64), math.MinInt64},
		{time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC), math.MinInt64},
		{time.Date(1, 1, 1, 0, 0, 1, 0, time.UTC), math.MinInt64},
	} {
		if got := ToNS(tc.t); got != tc.want {
			t.Errorf("ToNS(%s) = %d (%s), want %d", tc.t, got, FromNS(got), tc.want)
		}
	}
}

// FuzzValidateTimes fuzzes the times of an Allocation as a door builds it from parsed times (the
// Kubernetes discovery from a pod's, the decoders from text): an accepted one has every time
// in 2000-01-01..2106-02-07, stored as its very nanoseconds; a refused time is named with the
// time itself, never a wrapped one.
func FuzzValidateTimes(f *testing.F) {
	for _, seed := range [][3]int64{
		{time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC).Unix(), time.Date(2026, 1, 5, 0, 0, 10, 0, time.UTC).Unix(), 0},
		{time.Date(2610, 8, 1, 0, 0, 0, 0, time.UTC).Unix(), time.Date(2610, 8, 1, 0, 0, 0, 0, time.UTC).Unix(), 0},
		{time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC).Unix(), time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC).Unix(), time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC).Unix()},
		{-1 << 40, 1 << 40, math.MaxInt64},
	} {
		f.Add(seed[0], seed[1], seed[2], int64(0))
	}
	f.Fuzz(func(t *testing.T, requested, started, ended, nanos int64) {
		at := func(sec int64) time.Time {
			if sec == 0 {
				return time.Time{}
			}
			return time.Unix(sec, nanos%1e9).UTC()
		}
		a := Allocation{ID: "a1", Tenant: "acme", Tier: "pro", Node: "node-a", Instance: "gpu0",
			RequestedAt: at(requested), StartedAt: at(started), EndedAt: at(ended)}
		err := a.Validate("fuzz", 0)
		if err != nil {
			var e *Error
			if errors.As(err, &e) && strings.HasSuffix(e.Field, "_at") && e.Value != "missing" {
				given := map[string]time.Time{"requested_at": a.RequestedAt, "started_at": a.StartedAt, "ended_at": a.EndedAt}[e.Field]
				if !strings.Contains(e.Value, given.Format(time.RFC3339Nano)) && e.Reason == validate.ReasonInvalid {
					t.Fatalf("refusal %q does not quote %s", err, given.Format(time.RFC3339Nano))
				}
			}
			return
		}
		for _, tm := range []time.Time{a.RequestedAt, a.StartedAt, a.EndedAt} {
			if !tm.IsZero() && (tm.Before(validate.MinTimestamp) || tm.After(validate.MaxTime) || !FromNS(ToNS(tm)).Equal(tm)) {
				t.Fatalf("accepted %s: outside the range or not stored as given", tm.Format(time.RFC3339Nano))
			}
		}
	})
}
