package scenario

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/schemas/validate"
)

// FuzzParseTimes fuzzes a scenario's start and an allocation's offsets: an accepted scenario
// starts and ends, and its allocations are requested, ready and end, within
// 2000-01-01..2106-02-07, and the nanoseconds it publishes (AllocationEvents) are those very
// times; a refused start quotes the text as given.
func FuzzParseTimes(f *testing.F) {
	for _, seed := range [][4]string{
		{"2026-01-05T00:00:00Z", "0s", "5s", "1h"},
		{"2610-08-01T00:00:00Z", "0s", "5s", "1h"},
		{"2106-02-07T06:00:00Z", "0s", "5s", "1h"},
		{"2026-01-05T00:00:00Z", "0s", "5s", "2400000h"},
		{"2000-01-01T00:30:00+01:00", "0s", "5s", "1h"},
		{"9999-12-31T23:59:59.999999999Z", "1ns", "2ns", "3ns"},
	} {
		f.Add(seed[0], seed[1], seed[2], seed[3])
	}
	f.Fuzz(func(t *testing.T, start, requested, ready, end string) {
		doc := strings.Replace(valid, `start: "2026-01-05T00:00:00Z"`, "start: "+strconv.Quote(start), 1)
		doc = strings.Replace(doc, "requested: 0s, ready: 5s, end: 1h, workload: {sm: 0.5",
			"requested: "+strconv.Quote(requested)+", ready: "+strconv.Quote(ready)+", end: "+strconv.Quote(end)+", workload: {sm: 0.5", 1)
		s, err := Parse("f.yaml", []byte(doc))
		if err != nil {
			if ts, perr := time.Parse(time.RFC3339Nano, start); perr == nil && validate.CheckTime("start", start, ts) != nil &&
				!strings.Contains(err.Error(), "start: "+strconv.Quote(start)) {
				t.Fatalf("start %q out of range: %v does not quote it", start, err)
			}
			return
		}
		inRange := func(what string, tm time.Time) {
			if tm.Before(validate.MinTimestamp) || tm.After(validate.MaxTime) {
				t.Fatalf("accepted %s %s (start %q)", what, tm.Format(time.RFC3339Nano), start)
			}
		}
		inRange("start", s.Start)
		inRange("end", s.End())
		for _, e := range s.AllocationEvents() {
			for _, ns := range []int64{e.RequestedAtNs, e.StartedAtNs, e.EndedAtNs} {
				inRange("an allocation time", time.Unix(0, ns))
			}
		}
		a := s.Tenants[0].Allocations[0]
		if e := s.AllocationEvents()[0]; e.EndedAtNs != s.Start.Add(a.End).UnixNano() || !time.Unix(0, e.EndedAtNs).Equal(s.Start.Add(a.End)) {
			t.Fatalf("published end %d, not start + end %s", e.EndedAtNs, s.Start.Add(a.End))
		}
	})
}
