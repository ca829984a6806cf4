package service

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/period"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/attribution/stored"
	"github.com/slicemeter/slicemeter/internal/lograte"
)

// TestHandCloseAttributesWhatItNeeds: a close by hand through the service (the API's) of a
// period with minutes never attributed is refused, naming them, and has the passes attribute
// them, with the automatic close off; asked again once they are, it closes the period. Before,
// the close was refused every time: nothing attributed the minutes before the first stored one.
func TestHandCloseAttributesWhatItNeeds(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs ClickHouse")
	}
	ctx := context.Background()
	conn := chtest.NewDatabase(t, nil)
	book := chtest.Book()
	feb := period.Month{Year: 2026, Month: time.February}
	febStart, febEnd := feb.Bounds(time.UTC)
	clock := febEnd.Add(time.Hour)
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
	reg := prometheus.NewRegistry()
	now := func() time.Time { return clock }
	passes := Passes{Delay: 30 * time.Second, Lookback: 10 * time.Minute, Backfill: time.Hour, MaxRecompute: 31 * 24 * time.Hour,
		MaxMinutes: 120, Samples: store.SecondRollup}
	cfg := Config{Book: book, Interval: time.Minute, Window: time.Hour, Passes: passes}
	s := &service{cfg: cfg, conn: conn, logger: logger, logs: lograte.New(logger, time.Minute), sla: newSLAMetrics(reg, book),
		progress: progress{logger: logger}, now: now, handClosed: make(chan period.Month, handClosedQueue)}
	s.runner = NewRunner(conn, book, passes, s.sla, logger)
	s.runner.SetClock(now)
	s.fleet = newFleetMetrics(reg, s.tenantLimit())
	s.advice = newAdviceMetrics(reg)
	p := periods{conn: conn, closer: s.closer(), owe: s.oweHandClose}

	_, err := p.Close(ctx, feb, clock)
	if !errors.Is(err, stored.ErrNotAttributed) || !strings.Contains(err.Error(), "the service attributes the period's missing minutes now") {
		t.Fatalf("the first close: %v; want %v, saying the service attributes them", err, stored.ErrNotAttributed)
	}
	var closed period.Closed
	for i := 0; ; i++ {
		s.pass(ctx)
		clock = clock.Add(time.Minute)
		if closed, err = p.Close(ctx, feb, clock); err == nil {
			break
		}
		if i == 5 {
			t.Fatalf("February not closed after %d passes: %v\n%s", i+1, err, logs.String())
		}
	}
	if closed.Period != feb {
		t.Errorf("closed %v, want February", closed.Period)
	}
	out := logs.String()
	if n := strings.Count(out, "a billing period closed by hand has minutes never attributed"); n != 1 || !strings.Contains(out, "minutes=120") {
		t.Errorf("want one line naming the 120 minutes the close needs:\n%s", out)
	}
}
