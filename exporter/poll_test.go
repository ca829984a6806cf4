package exporter

import (
	"context"
	"slices"
	"testing"
	"time"
)

// waitClock records the times it was asked to wait for.
type waitClock struct{ waits []time.Duration }

func (c *waitClock) WaitUntil(ctx context.Context, t time.Time) error {
	c.waits = append(c.waits, time.Duration(t.UnixNano()))
	return ctx.Err()
}
func (c *waitClock) Late(time.Time) time.Duration { return 0 }

type pollSource struct {
	Source
	every time.Duration
	polls []time.Duration
}

func (p *pollSource) PollEvery() time.Duration { return p.every }
func (p *pollSource) Poll(_ context.Context, t time.Time, _ time.Duration) error {
	p.polls = append(p.polls, time.Duration(t.UnixNano()))
	return nil
}

// The polls between two ticks run on the ticks' clock, each waited for, at the source's rate;
// none where the tick itself is often enough.
func TestPollBefore(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name            string
		every, interval time.Duration
		want            []time.Duration
	}{
		{"250ms ticks, 200 ms polls", 200 * ms, 250 * ms, []time.Duration{950 * ms}},
		{"250ms ticks, 1 ms slices", 100 * ms, 250 * ms, []time.Duration{850 * ms, 950 * ms}},
		{"1s ticks", 200 * ms, time.Second, []time.Duration{200 * ms, 400 * ms, 600 * ms, 800 * ms}},
		{"100ms ticks", 200 * ms, 100 * ms, nil},
		{"no log", 0, time.Second, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &pollSource{every: tc.every}
			clock := &waitClock{}
			n, err := PollBefore(context.Background(), src, clock, time.Unix(0, int64(time.Second)), tc.interval)
			if err != nil || n != len(tc.want) || !slices.Equal(src.polls, tc.want) || !slices.Equal(clock.waits, tc.want) {
				t.Errorf("PollBefore = %d, %v; polls %v, waits %v; want %v", n, err, src.polls, clock.waits, tc.want)
			}
		})
	}
}
