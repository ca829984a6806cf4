package report

import (
	"strings"
	"testing"
	"time"
)

func TestWindows(t *testing.T) {
	at := func(s string) time.Time { v, _ := time.Parse(time.RFC3339, s); return v }
	tests := []struct {
		step, from, to string
		want           []string // start/end pairs as "start..end"
	}{
		{"", "2026-01-05T00:00:00Z", "2026-01-05T01:00:00Z", []string{"2026-01-05T00:00:00Z..2026-01-05T01:00:00Z"}},
		{"1h", "2026-01-05T00:00:00Z", "2026-01-05T02:30:00Z", []string{
			"2026-01-05T00:00:00Z..2026-01-05T01:00:00Z", "2026-01-05T01:00:00Z..2026-01-05T02:00:00Z", "2026-01-05T02:00:00Z..2026-01-05T02:30:00Z"}},
		{"1d", "2026-01-05T00:00:00Z", "2026-01-07T00:00:00Z", []string{"2026-01-05T00:00:00Z..2026-01-06T00:00:00Z", "2026-01-06T00:00:00Z..2026-01-07T00:00:00Z"}},
		{"month", "2026-01-01T00:00:00Z", "2026-03-15T00:00:00Z", []string{
			"2026-01-01T00:00:00Z..2026-02-01T00:00:00Z", "2026-02-01T00:00:00Z..2026-03-01T00:00:00Z", "2026-03-01T00:00:00Z..2026-03-15T00:00:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.step, func(t *testing.T) {
			ws, err := Windows(at(tt.from), at(tt.to), tt.step)
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
