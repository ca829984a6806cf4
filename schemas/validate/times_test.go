package validate

import (
	"strings"
	"testing"
	"time"
)

func TestCheckTime(t *testing.T) {
	for _, tc := range []struct {
		given string
		ok    bool
	}{
		{"2000-01-01T00:00:00Z", true},
		{"1999-12-31T23:59:59.999999999Z", false},
		{"1970-01-01T00:00:00Z", false},
		{"0001-01-01T00:00:00Z", false},
		{"2106-02-07T06:28:15Z", true},
		{"2106-02-07T06:28:16Z", false},
		{"2610-08-01T00:00:00Z", false}, // UnixNano would wrap to 2026
		{"9999-12-31T00:00:00Z", false},
	} {
		ts, err := time.Parse(time.RFC3339Nano, tc.given)
		if err != nil {
			t.Fatal(err)
		}
		r := CheckTime("from", tc.given, ts)
		if (r == nil) != tc.ok {
			t.Errorf("CheckTime(%s) = %v, want ok %v", tc.given, r, tc.ok)
		}
		if r != nil && (!strings.Contains(r.Error(), tc.given) || !strings.Contains(r.Error(), "from: ") || !strings.Contains(r.Error(), "2106-02-07T06:28:15Z")) {
			t.Errorf("CheckTime(%s): %q should name the field, the value as given and the range", tc.given, r)
		}
	}
}
