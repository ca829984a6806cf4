package allocations

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/schemas/allocation"
	"github.com/slicemeter/slicemeter/schemas/validate"
)

// timesFile is an allocations file (JSON or CSV, by source) whose allocation has the times given.
func timesFile(source, requested, started, ended string) []byte {
	if strings.HasSuffix(source, ".csv") {
		return []byte(strings.Join(Columns, ",") + "\n" + strings.Join([]string{"a1", "acme", "pro", "node-a", "gpu0", requested, started, ended}, ",") + "\n")
	}
	endedJSON := "null"
	if ended != "" {
		endedJSON = strconv.Quote(ended)
	}
	return fmt.Appendf(nil, `{"allocation_id": "a1", "tenant": "acme", "tier": "pro", "node": "node-a", "instance_id": "gpu0",
  "requested_at": %s, "started_at": %s, "ended_at": %s}`, strconv.Quote(requested), strconv.Quote(started), endedJSON)
}

// TestDecodeTimesOutOfRange: a time outside 2000-01-01..2106-02-07 is refused in every format
// (HTTP bodies and import files are JSON; import files also CSV), naming the field and quoting
// the value as given. Before, a start in 2610 was stored as 2026-01-10T00:25:26Z (UnixNano
// wraps after 2262) and 9999 was refused as "1816-03-30".
func TestDecodeTimesOutOfRange(t *testing.T) {
	const ok = "2026-01-05T00:00:00Z"
	for _, tc := range []struct {
		name                      string
		requested, started, ended string
		field, value              string // empty: accepted
	}{
		{"in range", ok, "2026-01-05T00:00:10Z", "2026-01-05T01:00:00Z", "", ""},
		{"from 2000 to 2106", "2000-01-01T00:00:00Z", "2000-01-01T00:00:00Z", "2106-02-07T06:28:15.999999999Z", "", ""},
		{"offset within range", "2000-01-01T01:00:00+01:00", "2000-01-01T01:00:00+01:00", "", "", ""},
		{"started in 2610", "2610-08-01T00:00:00Z", "2610-08-01T00:00:00Z", "", "requested_at", "2610-08-01T00:00:00Z"},
		{"ended in 2610", ok, ok, "2610-09-01T00:00:00Z", "ended_at", "2610-09-01T00:00:00Z"},
		{"started in 9999", ok, "9999-12-31T00:00:00Z", "", "started_at", "9999-12-31T00:00:00Z"},
		{"ended just after 2106", ok, ok, "2106-02-07T06:28:16Z", "ended_at", "2106-02-07T06:28:16Z"},
		{"requested in 1999", "1999-12-31T23:59:59Z", ok, "", "requested_at", "1999-12-31T23:59:59Z"},
		{"offset just before 2000", "2000-01-01T00:30:00+01:00", ok, "", "requested_at", "2000-01-01T00:30:00+01:00"},
		{"requested in year 1", "0001-01-01T00:00:00Z", ok, "", "requested_at", "0001-01-01T00:00:00Z"},
		{"requested before 1678 (UnixNano wraps too)", "1500-01-01T00:00:00Z", ok, "", "requested_at", "1500-01-01T00:00:00Z"},
	} {
		for _, source := range []string{"in.json", "in.csv"} {
			t.Run(tc.name+"/"+source, func(t *testing.T) {
				allocs, err := Decode(source, timesFile(source, tc.requested, tc.started, tc.ended))
				if tc.field == "" {
					if err != nil || len(allocs) != 1 {
						t.Fatalf("refused: %v", err)
					}
					if want, _ := time.Parse(time.RFC3339Nano, tc.started); !allocs[0].StartedAt.Equal(want) ||
						!allocation.FromNS(allocation.ToNS(allocs[0].StartedAt)).Equal(want) {
						t.Errorf("started %s, want %s", allocs[0].StartedAt, want)
					}
					return
				}
				if err == nil {
					t.Fatalf("accepted %+v, want %s refused", allocs, tc.field)
				}
				var ae *allocation.Error
				msg := err.Error()
				if !asError(err, &ae) || ae.Field != tc.field || ae.Reason != validate.ReasonInvalid || ae.Line != 2 && source == "in.csv" {
					t.Errorf("error %#v, want field %s, reason invalid, at its line", err, tc.field)
				}
				if !strings.Contains(msg, strconv.Quote(tc.value)) || !strings.Contains(msg, "2106-02-07T06:28:15Z") || !strings.Contains(msg, "2000-01-01T00:00:00Z") {
					t.Errorf("%q should quote %q as given and the range", msg, tc.value)
				}
			})
		}
	}
}

func asError(err error, target **allocation.Error) bool { return errors.As(err, target) }

// FuzzDecodeTimes fuzzes the times of an allocation in both formats: an accepted time lies in
// 2000-01-01..2106-02-07 and is stored as the very time given (its nanoseconds read back the
// same); a refusal of a time names the field and quotes the text as given.
func FuzzDecodeTimes(f *testing.F) {
	for _, seed := range [][3]string{
		{"2026-01-05T00:00:00Z", "2026-01-05T00:00:10Z", ""},
		{"2610-08-01T00:00:00Z", "2610-08-01T00:00:00Z", ""},
		{"2026-01-05T00:00:00Z", "2026-01-05T00:00:00Z", "9999-12-31T00:00:00Z"},
		{"1969-12-31T23:59:59.999999999Z", "2000-01-01T00:00:00+01:00", ""},
		{"2262-04-11T23:47:16.854775808Z", "2262-04-11T23:47:16.854775808Z", ""},
		{"2106-02-07T06:28:15.999999999Z", "2106-02-07T06:28:15.999999999-00:01", ""},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	f.Fuzz(func(t *testing.T, requested, started, ended string) {
		for _, source := range []string{"f.json", "f.csv"} {
			allocs, err := Decode(source, timesFile(source, requested, started, ended))
			if err != nil {
				var ae *allocation.Error
				if asError(err, &ae) && ae.Reason != "" && strings.HasSuffix(ae.Field, "_at") {
					given := map[string]string{"requested_at": requested, "started_at": started, "ended_at": ended}[ae.Field]
					if !strings.Contains(ae.Value, strconv.Quote(strings.TrimSpace(given))) && ae.Value != "missing" {
						t.Fatalf("%s: refusal %q does not quote %q as given", source, err, given)
					}
				}
				continue
			}
			a := allocs[0]
			for _, tm := range []time.Time{a.RequestedAt, a.StartedAt, a.EndedAt} {
				if tm.IsZero() {
					continue
				}
				if tm.Before(validate.MinTimestamp) || tm.After(validate.MaxTime) || !allocation.FromNS(allocation.ToNS(tm)).Equal(tm) {
					t.Fatalf("%s: accepted %s, outside the range or not stored as given", source, tm.Format(time.RFC3339Nano))
				}
			}
		}
	})
}
