package faillimit

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// TestLimiter: an address may fail Burst times, then waits Refill for each more; other
// addresses are not affected.
func TestLimiter(t *testing.T) {
	l := New()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l.Now = func() time.Time { return now }
	for i := range Burst {
		if w := l.Fail("a"); w != 0 {
			t.Fatalf("failure %d: wait %s, want none", i+1, w)
		}
	}
	if w := l.Fail("a"); w != Refill {
		t.Errorf("failure %d: wait %s, want %s", Burst+1, w, Refill)
	}
	if w := l.Fail("b"); w != 0 {
		t.Errorf("another address waits %s, want not", w)
	}
	now = now.Add(Refill / 2)
	if w := l.Fail("a"); w != Refill/2 {
		t.Errorf("half a refill later: wait %s, want %s", w, Refill/2)
	}
	now = now.Add(Refill / 2)
	if w := l.Fail("a"); w != 0 {
		t.Errorf("a refill later: wait %s, want none", w)
	}
	if w := l.Fail("a"); w == 0 {
		t.Errorf("a second failure after one refill: no wait")
	}
	l.Refund("a") // the check counted by the Fail that waited none succeeded
	if w := l.Fail("a"); w != 0 {
		t.Errorf("after a refund: wait %s, want none", w)
	}
}

// TestLimiterBounded: a flood from more addresses than the map holds keeps it bounded.
func TestLimiterBounded(t *testing.T) {
	l := New()
	for i := range 3 * MaxAddrs {
		l.Fail(fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255))
	}
	if n := l.Len(); n > MaxAddrs {
		t.Errorf("%d addresses held; want at most %d", n, MaxAddrs)
	}
}

func TestRetryAfter(t *testing.T) {
	for _, tt := range []struct{ wait, want time.Duration }{
		{0, time.Second}, {time.Millisecond, time.Second}, {time.Second, time.Second}, {5500 * time.Millisecond, 6 * time.Second},
	} {
		if got := RetryAfter(tt.wait); got != tt.want {
			t.Errorf("RetryAfter(%s) = %s, want %s", tt.wait, got, tt.want)
		}
	}
}

// TestAddress: failures count per IP, not per port; IPv6 per /64.
func TestAddress(t *testing.T) {
	for _, tt := range []struct{ remote, want string }{
		{"192.0.2.1:1234", "192.0.2.1"},
		{"[2001:db8::1]:443", "2001:db8::/64"},
		{"[2001:db8::ffff:1]:80", "2001:db8::/64"},
		{"[::ffff:192.0.2.1]:80", "192.0.2.1"},
		{"@", "@"},
	} {
		r, _ := http.NewRequest("GET", "/", nil)
		r.RemoteAddr = tt.remote
		if got := Address(r); got != tt.want {
			t.Errorf("Address(%q) = %q, want %q", tt.remote, got, tt.want)
		}
	}
}
