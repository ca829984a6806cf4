package report

import (
	"strings"
	"testing"
	"time"
)

func TestWindows(t *testing.T) {
	at := func(s string) time.Time { v, _ := time.Parse(time.RFC3339, s); return v }
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		step, from, to string
		loc            *time.Location // nil: UTC
		want           []string       // start/end pairs as "start..end"
	}{
		{"", "2026-01-05T00:00:00Z", "2026-01-05T01:00:00Z", nil, []string{"2026-01-05T00:00:00Z..2026-01-05T01:00:00Z"}},
		{"1h", "2026-01-05T00:00:00Z", "2026-01-05T02:30:00Z", nil, []string{
			"2026-01-05T00:00:00Z..2026-01-05T01:00:00Z", "2026-01-05T01:00:00Z..2026-01-05T02:00:00Z", "2026-01-05T02:00:00Z..2026-01-05T02:30:00Z"}},
		{"1d", "2026-01-05T00:00:00Z", "2026-01-07T00:00:00Z", nil, []string{"2026-01-05T00:00:00Z..2026-01-06T00:00:00Z", "2026-01-06T00:00:00Z..2026-01-07T00:00:00Z"}},
		{"month", "2026-01-01T00:00:00Z", "2026-03-15T00:00:00Z", nil, []string{
			"2026-01-01T00:00:00Z..2026-02-01T00:00:00Z", "2026-02-01T00:00:00Z..2026-03-01T00:00:00Z", "2026-03-01T00:00:00Z..2026-03-15T00:00:00Z"}},
		// From inside a month: the first window ends at the month's end, not a month later.
		{"month", "2026-01-15T12:00:00Z", "2026-03-01T00:00:00Z", nil, []string{
			"2026-01-15T12:00:00Z..2026-02-01T00:00:00Z", "2026-02-01T00:00:00Z..2026-03-01T00:00:00Z"}},
		// Europe/Berlin: CET (UTC+1) in winter, CEST (UTC+2) from the last Sunday of March
		// to the last Sunday of October: March is 743 h, October 745 h.
		{"month", "2026-02-28T23:00:00Z", "2026-04-30T22:00:00Z", berlin, []string{
			"2026-02-28T23:00:00Z..2026-03-31T22:00:00Z", "2026-03-31T22:00:00Z..2026-04-30T22:00:00Z"}},
		{"month", "2026-09-30T22:00:00Z", "2026-11-30T23:00:00Z", berlin, []string{
			"2026-09-30T22:00:00Z..2026-10-31T23:00:00Z", "2026-10-31T23:00:00Z..2026-11-30T23:00:00Z"}},
		// A UTC month start is inside Berlin's previous month for an hour.
		{"month", "2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z", berlin, []string{
			"2026-01-01T00:00:00Z..2026-01-31T23:00:00Z", "2026-01-31T23:00:00Z..2026-02-01T00:00:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.step, func(t *testing.T) {
			ws, err := WindowsIn(at(tt.from), at(tt.to), tt.step, tt.loc)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range ws {
				got = append(got, w.Start.Format(time.RFC3339)+".."+w.End.Format(time.RFC3339))
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("windows = %v, want %v", got, tt.want)
			}
			if tt.step == "month" && tt.loc != nil {
				for _, w := range ws[:len(ws)-1] { // every end but the window's own
					if l := w.End.In(tt.loc); l.Day() != 1 || l.Hour() != 0 || l.Minute() != 0 {
						t.Errorf("window ending %s ends at %s locally, want a month's first midnight", w.End, l)
					}
				}
			}
		})
	}
	for _, step := range []string{"0d", "x", "-1h", "500ms", "1w"} {
		if _, err := Windows(at("2026-01-05T00:00:00Z"), at("2026-01-06T00:00:00Z"), step); err == nil || !strings.Contains(err.Error(), step) {
			t.Errorf("step %q: error %v, want one naming it", step, err)
		}
	}
	if _, err := Windows(at("2026-01-06T00:00:00Z"), at("2026-01-05T00:00:00Z"), "1h"); err == nil {
		t.Error("reversed window accepted")
	}
}

func TestParseWindow(t *testing.T) {
	tests := []struct {
		from, to string
		err      string
	}{
		{"2026-01-05T00:00:00Z", "2026-01-05T01:00:00+01:00", "--to (2026-01-05T01:00:00+01:00) must be after --from (2026-01-05T00:00:00Z)"},
		{"yesterday", "2026-01-05T01:00:00Z", `--from "yesterday": expected an RFC 3339 time`},
		{"2026-01-05T00:00:00Z", "", `--to "": expected an RFC 3339 time`},
		{"2026-01-05T00:30:00.5Z", "2026-01-05T02:00:00.5+01:00", ""},
		// A date is midnight UTC of that day.
		{"2026-01-04T23:30:00Z", "2026-01-05", ""},
		{"2026-01-05", "2026-01-05", "--to (2026-01-05) must be after --from (2026-01-05)"},
		{"2026-1-5", "2026-01-06", `--from "2026-1-5": expected an RFC 3339 time such as 2026-01-05T00:00:00Z or a date such as 2026-01-05 (midnight UTC)`},
		{"2026-01-32", "2026-02-06", `--from "2026-01-32"`},
		{"1999-12-31", "2026-02-06", `--from: "1999-12-31"; expected a time from 2000-01-01`},
	}
	for _, tt := range tests {
		from, to, err := ParseWindow("--from", tt.from, "--to", tt.to)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s, %s: error %v, want %q", tt.from, tt.to, err, tt.err)
		case tt.err == "" && (err != nil || from.Location() != time.UTC || to.Sub(from) != 30*time.Minute):
			t.Errorf("%s, %s: %v, %v, %v; want UTC half an hour apart", tt.from, tt.to, from, to, err)
		}
	}
	from, to, err := ParseWindow("--from", "2026-01-05", "--to", "2026-02-01")
	if want := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC); err != nil || !from.Equal(want) || !to.Equal(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("dates 2026-01-05, 2026-02-01: %v, %v, %v; want midnights UTC", from, to, err)
	}
}

// TestCountWindows: the count is WindowsIn's length, for every kind of step, in UTC and in
// zones with summer time and half-hour offsets, computed without building a window.
func TestCountWindows(t *testing.T) {
	zones := []*time.Location{time.UTC}
	for _, name := range []string{"Europe/Berlin", "Asia/Kolkata", "America/St_Johns", "Pacific/Chatham"} {
		loc, err := time.LoadLocation(name)
		if err != nil {
			t.Fatal(err)
		}
		zones = append(zones, loc)
	}
	at := func(s string) time.Time { v, _ := time.Parse(time.RFC3339Nano, s); return v }
	edges := []string{"2026-01-01T00:00:00Z", "2026-01-31T23:00:00Z", "2026-02-28T23:00:00Z", "2026-03-29T01:30:00Z",
		"2026-03-31T22:00:00Z", "2026-10-25T00:59:59.5Z", "2026-10-31T23:00:00Z", "2027-01-01T00:00:00Z", "2028-02-29T18:30:00Z"}
	for _, loc := range zones {
		for _, step := range []string{"", "1h", "15m", "7m30s", "1d", "7d", "month"} {
			for i, f := range edges {
				for _, to := range edges[i+1:] {
					from, to := at(f), at(to)
					ws, err := WindowsIn(from, to, step, loc)
					if err != nil {
						t.Fatal(err)
					}
					n, err := CountWindows(from, to, step, loc)
					if err != nil || n != len(ws) {
						t.Errorf("%s %q [%s, %s): CountWindows %d, %v; WindowsIn built %d", loc, step, from, to, n, err, len(ws))
					}
				}
			}
		}
	}
}

// TestCountWindowsHuge: the widest accepted range in minutes, and ranges far beyond it, are
// counted at once; WindowsIn refuses what it would not build instead of building it.
func TestCountWindowsHuge(t *testing.T) {
	at := func(s string) time.Time { v, _ := time.Parse(time.RFC3339, s); return v }
	for _, tc := range []struct {
		from, to, step string
		want           int
	}{
		{"2000-01-01T00:00:00Z", "2106-02-07T00:00:00Z", "1m", 55804320},
		{"2000-01-01T00:00:00Z", "2106-02-07T00:00:00Z", "1s", 55804320 * 60},
		{"2000-01-01T00:00:00Z", "2106-02-07T00:00:00Z", "month", 1274},
		{"0001-01-01T00:00:00Z", "9999-12-31T00:00:00Z", "1h", 87649392},
		{"0001-01-01T00:00:00Z", "9999-12-31T00:00:00Z", "1d", 3652058},
		{"0001-01-01T00:00:00Z", "9999-12-31T00:00:00Z", "2000000h", 44},
	} {
		start := time.Now()
		n, err := CountWindows(at(tc.from), at(tc.to), tc.step, time.UTC)
		if err != nil || n != tc.want {
			t.Errorf("CountWindows(%s, %s, %q) = %d, %v; want %d", tc.from, tc.to, tc.step, n, err, tc.want)
		}
		if _, err := WindowsIn(at(tc.from), at(tc.to), tc.step, time.UTC); tc.want > MaxBuiltWindows && err == nil {
			t.Errorf("WindowsIn(%s, %s, %q) built %d windows", tc.from, tc.to, tc.step, tc.want)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("%s..%s step %q took %s", tc.from, tc.to, tc.step, d)
		}
	}
	if _, err := CountWindows(at("2026-01-01T00:00:00Z"), at("2026-02-01T00:00:00Z"), "9223372036854775807d", time.UTC); err == nil {
		t.Error("a step of 9223372036854775807 days was accepted")
	}
}

// TestParseWindowRange: an edge outside 2000-01-01..2106-02-07 is refused naming the flag,
// the value as given and the range, before it is converted to anything.
func TestParseWindowRange(t *testing.T) {
	for _, tc := range []struct{ from, to, bad string }{
		{"0001-01-01T00:00:00Z", "2026-01-01T00:00:00Z", "--from"},
		{"1999-12-31T23:59:59Z", "2026-01-01T00:00:00Z", "--from"},
		{"2026-01-01T00:00:00Z", "2610-08-01T00:00:00Z", "--to"},
		{"2026-01-01T00:00:00Z", "9999-12-31T00:00:00Z", "--to"},
	} {
		_, _, err := ParseWindow("--from", tc.from, "--to", tc.to)
		value := tc.from
		if tc.bad == "--to" {
			value = tc.to
		}
		if err == nil || !strings.Contains(err.Error(), tc.bad) || !strings.Contains(err.Error(), value) || !strings.Contains(err.Error(), "2106-02-07") {
			t.Errorf("ParseWindow(%s, %s): %v", tc.from, tc.to, err)
		}
	}
	if _, _, err := ParseWindow("--from", "2000-01-01T00:00:00Z", "--to", "2106-02-07T00:00:00Z"); err != nil {
		t.Errorf("the widest accepted window: %v", err)
	}
}
