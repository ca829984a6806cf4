package exporter

import (
	"context"
	"time"
)

// Poller is a source with reads due between its ticks: NVML's vGPU scheduler log keeps only
// the latest 200 entries, so it is read several times a tick when ticks are long. The polls run
// on the ticks' Clock, at times of the source's own clock (real time, a simulator's or a
// replay's fast clock), so that a simulated or replayed node is read on the same schedule as a
// real one.
type Poller interface {
	// PollEvery is how often, in the source's time, Poll must run; 0: never. It may change as
	// the source learns its devices (a vGPU scheduler's time slice).
	PollEvery() time.Duration
	// Poll reads what must be read at time t, which lies inside the window of the next tick
	// (interval is the sampling interval, the same as Read's).
	Poll(ctx context.Context, t time.Time, interval time.Duration) error
}

// PollBefore runs src's polls due in the window of tick t, (t−interval, t): at t − interval +
// k·PollEvery, each once clock has reached it. A source that is not a Poller, or whose
// PollEvery is 0 or at least interval, is read by its ticks alone. It returns how many polls
// ran and the first error of one (the polls after it still run), or ctx's error once ctx ends.
func PollBefore(ctx context.Context, src Source, clock Clock, t time.Time, interval time.Duration) (int, error) {
	p, ok := src.(Poller)
	if !ok {
		return 0, nil
	}
	var first error
	n := 0
	for at := t.Add(-interval); ; {
		every := p.PollEvery()
		if every <= 0 || every >= interval {
			return n, first
		}
		if at = at.Add(every); !at.Before(t) {
			return n, first
		}
		if err := clock.WaitUntil(ctx, at); err != nil {
			return n, err
		}
		n++
		if err := p.Poll(ctx, at, interval); err != nil && first == nil {
			first = err
		}
	}
}
