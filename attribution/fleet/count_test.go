package fleet

import (
	"strings"
	"testing"
	"time"
)

// TestCountHours: the hours a window touches, counted from its edges alone, at once even for
// the widest ranges.
func TestCountHours(t *testing.T) {
	at := func(s string) time.Time { v, _ := time.Parse(time.RFC3339, s); return v }
	for _, tc := range []struct {
		from, to string
		want     int
	}{
		{"2026-01-05T00:00:00Z", "2026-01-05T01:00:00Z", 1},
		{"2026-01-05T00:00:00Z", "2026-01-05T00:01:00Z", 1},
		{"2026-01-05T00:59:00Z", "2026-01-05T01:01:00Z", 2},
		{"2026-01-05T00:30:00Z", "2026-01-05T03:30:00Z", 4},
		{"2026-01-05T00:00:00Z", "2026-01-05T00:00:00Z", 0},
		{"2000-01-01T00:00:00Z", "2106-02-07T00:00:00Z", 930072},
		{"2000-01-01T00:00:00Z", "2106-02-07T06:28:00Z", 930079},
		{"1900-01-01T00:30:00Z", "1900-01-01T02:00:00Z", 2},
		{"0001-01-01T00:00:00Z", "9999-12-31T00:00:00Z", 87649392},
	} {
		if got := CountHours(at(tc.from), at(tc.to)); got != tc.want {
			t.Errorf("CountHours(%s, %s) = %d, want %d", tc.from, tc.to, got, tc.want)
		}
	}
}

// TestCheckWindowRange: an edge outside 2000-01-01..2106-02-07 is refused before Read converts
// it to nanoseconds (a year 2610 would wrap into 2026).
func TestCheckWindowRange(t *testing.T) {
	at := func(s string) time.Time { v, _ := time.Parse(time.RFC3339, s); return v }
	for _, w := range [][2]string{{"1900-01-01T00:00:00Z", "2026-01-01T00:00:00Z"}, {"2026-01-01T00:00:00Z", "2610-08-01T00:00:00Z"}} {
		if err := CheckWindow(at(w[0]), at(w[1])); err == nil || !strings.Contains(err.Error(), "2106-02-07") {
			t.Errorf("CheckWindow(%s, %s): %v", w[0], w[1], err)
		}
	}
	if err := CheckWindow(at("2000-01-01T00:00:00Z"), at("2106-02-07T06:28:00Z")); err != nil {
		t.Errorf("the widest window: %v", err)
	}
}
