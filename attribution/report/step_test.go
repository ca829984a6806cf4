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
}
