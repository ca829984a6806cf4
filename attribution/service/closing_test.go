package service

import (
	"bytes"
	"context"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/period"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/attribution/stored"
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

// TestCloseAttributesWhatItNeeds is the wedge of issue 25: January closed by hand (from the
// samples), and February due, but its first two hours never attributed (the service started
// after them: they are before its first stored minute, so no pass and no hole scan would ever
// attribute them). Before, every pass failed the close with "120 of its 40320 minutes are not
// attributed yet", logged an ERROR a minute, and March would have waited behind it. Now the
// close records those minutes (reason period_close), the passes attribute them, and the next
// try closes February; the failures are counted, the pending periods are a gauge, and the
// log says it once.
func TestCloseAttributesWhatItNeeds(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs ClickHouse")
	}
	ctx := context.Background()
	conn := chtest.NewDatabase(t, nil)
	book := chtest.Book()
	feb := period.Month{Year: 2026, Month: time.February}
	febStart, febEnd := feb.Bounds(time.UTC)
	clock := febEnd.Add(72*time.Hour + 30*time.Minute) // due since 30 minutes
	// The service's minutes from Feb 1 02:00 on (nothing was sampled: marker rows only).
	var minutes []stored.Minute
	for m := febStart.Add(2 * time.Hour); m.Before(clock.Add(-time.Minute)); m = m.Add(time.Minute) {
		minutes = append(minutes, stored.Minute{Start: m, Report: report.Report{WindowStart: m, WindowEnd: m.Add(time.Minute), Currency: book.Currency}})
	}
	if err := stored.WriteMinutes(ctx, conn, minutes, clock.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := (period.Closer{Conn: conn, Book: book}).Close(ctx, period.Month{Year: 2026, Month: time.January}, clock); err != nil {
		t.Fatalf("close January by hand, from the samples: %v", err)
	}

	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	runner := NewRunner(conn, book, Passes{Delay: 30 * time.Second, Lookback: 10 * time.Minute, Backfill: time.Hour, MaxRecompute: 31 * 24 * time.Hour,
		MaxMinutes: 120, Samples: store.SecondRollup}, nil, logger)
	runner.SetClock(func() time.Time { return clock })
	reg := prometheus.NewRegistry()
	closer := period.Closer{Conn: conn, Book: book, Options: attribution.Options{FromMinutes: true, Delay: 30 * time.Second}, Logger: logger}
	c := newClosing(closer, 72*time.Hour, time.Minute, runner, newCloseMetrics(reg), logger)
	c.now = func() time.Time { return clock }

	var closed []period.Closed
	for i := 0; i < 6 && len(closed) == 0; i++ {
		if _, err := runner.Once(ctx); err != nil {
			t.Fatalf("pass %d: %v", i, err)
		}
		if closed = c.run(ctx); len(closed) == 0 && i == 0 {
			if got := testutil.ToFloat64(c.metrics.pending); got != 1 {
				t.Errorf("periods owed a close after the first try: %v, want 1", got)
			}
			if got := testutil.ToFloat64(c.metrics.overdue); got != (30 * time.Minute).Seconds() {
				t.Errorf("overdue: %v s, want 1800 (due since 30 minutes)", got)
			}
		}
		clock = maxTime(clock.Add(time.Minute), c.retry.next)
	}
	if len(closed) != 1 || closed[0].Period != feb {
		t.Fatalf("closed %v; want February, once its two hours never attributed are attributed\n%s", closed, logs.String())
	}
	if n, err := stored.FromMinutes(ctx, conn, febStart, febEnd); err != nil {
		t.Errorf("February from the stored minutes: %v (%v)", err, n.WindowStart)
	}
	if got := testutil.ToFloat64(c.metrics.failures.WithLabelValues(closeNotAttributed)); got != 1 {
		t.Errorf("closes failed for minutes not attributed: %v, want 1", got)
	}
	if got := testutil.ToFloat64(c.metrics.pending); got != 0 {
		t.Errorf("periods owed a close once February closed: %v, want 0", got)
	}
	out := logs.String()
	if n := strings.Count(out, "the service attributes them now"); n != 1 || strings.Contains(out, "level=ERROR") {
		t.Errorf("want one line saying the close attributes what it needs, no ERROR:\n%s", out)
	}
	if !strings.Contains(out, "minutes=120") {
		t.Errorf("the line names the 120 minutes owed:\n%s", out)
	}
}

// TestCloseMetrics: the close's and the backfill's metrics exist from the start at 0 (the
// first failure is visible to increase() and to the alert) and pass promtool's lint.
func TestCloseMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	newCloseMetrics(reg)
	watchOwed(reg, NewRunner(nil, chtest.Book(), DefaultPasses, nil, nil))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	text := buf.String()
	for _, want := range []string{`slicemeter_billing_close_failures_total{reason="not_attributed"} 0`, `slicemeter_billing_close_failures_total{reason="error"} 0`,
		"slicemeter_billing_close_pending_periods 0", "slicemeter_billing_close_overdue_seconds 0", "slicemeter_attribution_backfill_seconds 0"} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("no %q at start:\n%s", want, text)
		}
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if testing.Short() {
			t.Skip("promtool not installed")
		}
		t.Fatal("promtool not found: run make deps (Debian package prometheus)")
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(text)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
