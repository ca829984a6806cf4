package service

import (
	"bytes"
	"context"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestProgress: a backfill of 500 minutes at 120 a pass, one pass a minute, is a first-pass
// line, a progress line a pass (each ≥ 30 s apart, with an estimate of the time left) with what is done and left, and a caught-up
// line with the totals; then one heartbeat line per 10 minutes, not one per pass.
func TestProgress(t *testing.T) {
	var buf bytes.Buffer
	pr := progress{logger: slog.New(slog.NewTextHandler(&buf, nil))}
	ctx := context.Background()
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	closed := t0.Truncate(time.Minute)
	from := closed.Add(-500 * time.Minute)
	done := from
	now := t0
	for pass := 0; pass < 30; pass++ {
		n := min(120, int(closed.Sub(done)/time.Minute))
		p := Pass{From: done, To: done.Add(time.Duration(n) * time.Minute), Fresh: n, Done: done.Add(time.Duration(n) * time.Minute)}
		if n == 0 { // caught up: each pass attributes the minute that closed
			closed = closed.Add(time.Minute)
			p = Pass{From: done, To: closed, Fresh: 1, Done: closed}
		}
		done = p.Done
		pr.pass(ctx, now, p, nil, closed)
		now = now.Add(time.Minute)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	var msgs []string
	for _, l := range lines {
		msgs = append(msgs, regexp.MustCompile(`msg="([^"]*)"`).FindStringSubmatch(l)[1])
	}
	want := []string{
		"attribution: first pass done",                                                     // 120 of 500
		"attribution: catching up", "attribution: catching up", "attribution: catching up", // 240, 360, 480
		"attribution: caught up",                     // 500
		"attribution: passes", "attribution: passes", // heartbeats, 10 minutes apart
	}
	if strings.Join(msgs, "|") != strings.Join(want, "|") {
		t.Fatalf("lines:\n%s\nwant messages %q", buf.String(), want)
	}
	for i, w := range map[int][]string{
		0: {"fresh_minutes=120", "minutes_behind=380"},
		2: {"fresh_minutes=360", "minutes_behind=140", "eta=1m10s"}, // 120 minutes a minute
		4: {"fresh_minutes=500", "took=4m0s"},
		5: {"passes=10", "fresh_minutes=10"},
	} {
		for _, s := range w {
			if !strings.Contains(lines[i], s) {
				t.Errorf("line %d lacks %q: %s", i, s, lines[i])
			}
		}
	}
}
