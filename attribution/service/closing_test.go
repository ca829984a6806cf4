package service

import (
	"testing"
	"time"
)

// TestBackoff: a failed close is retried after the pass interval, then twice as long at each
// consecutive failure up to the cap, and at once after a success.
func TestBackoff(t *testing.T) {
	t0 := time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC)
	b := backoff{min: time.Minute, max: 30 * time.Minute}
	if !b.due(t0) {
		t.Fatal("a first attempt waits")
	}
	now := t0
	for i, want := range []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute, 30 * time.Minute, 30 * time.Minute} {
		if got := b.fail(now); got != want {
			t.Fatalf("failure %d: retry in %s, want %s", i+1, got, want)
		}
		if b.due(now.Add(want - time.Second)) {
			t.Fatalf("failure %d: due %s before its back-off ends", i+1, want-time.Second)
		}
		if now = now.Add(want); !b.due(now) {
			t.Fatalf("failure %d: not due once its back-off of %s ended", i+1, want)
		}
	}
	b.reset()
	if !b.due(now) || b.fail(now) != time.Minute {
		t.Error("after a success the back-off starts again from the interval")
	}
}
