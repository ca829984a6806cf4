package exporter

import (
	"context"
	"time"
)

// Clock decides when a tick is taken. Tick times are the source's wall clock; a clock maps them
// onto real time (or onto none at all).
type Clock interface {
	// WaitUntil blocks until tick time t has come.
	WaitUntil(ctx context.Context, t time.Time) error
	// Late says how far behind tick time t the clock is now (sampling jitter).
	Late(t time.Time) time.Duration
}

// RealClock runs tick times in real time. Offset maps tick time onto wall time: a simulated
// scenario that starts in the past runs from now on (wall = tick + Offset).
type RealClock struct {
	Offset time.Duration
}

// WaitUntil sleeps until the wall time of tick t.
func (c RealClock) WaitUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t.Add(c.Offset))
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// Late is how long after its wall time tick t is being taken.
func (c RealClock) Late(t time.Time) time.Duration { return time.Since(t.Add(c.Offset)) }

// FastClock never waits: ticks are taken as fast as the pipeline accepts them.
type FastClock struct{}

// WaitUntil returns at once.
func (FastClock) WaitUntil(ctx context.Context, _ time.Time) error { return ctx.Err() }

// Late is always 0: simulated time has no schedule to miss.
func (FastClock) Late(time.Time) time.Duration { return 0 }
