package service_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/service"
	"github.com/slicemeter/slicemeter/attribution/stored"
	"github.com/slicemeter/slicemeter/schemas/scenario"
)

// TestBackfillOpenPeriod: a service started two hours after the scenario's samples with the
// default backfill of an hour used to attribute only that hour, leaving the scenario's
// minutes, and any report or close of its period from the stored minutes, unattributed for
// ever. With OpenFrom, the first pass records the minutes from the period's start as a
// backfill; the passes attribute them oldest first, a live turn (the fresh minutes) between
// two turns of the backlog, so that the live minutes are never held back by it; the empty
// minutes before the first sample are stored without computing each; and at the end the
// stored minutes of the whole day so far sum to the report from the samples.
func TestBackfillOpenPeriod(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs ClickHouse")
	}
	ctx := context.Background()
	sc, err := scenario.Load(filepath.Join("..", "..", "schemas", "scenario", "testdata", "mig-basic.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	conn := chtest.NewDatabase(t, nil)
	chtest.InsertScenario(t, conn, sc)
	day := sc.Start.Truncate(24 * time.Hour) // the scenario starts at midnight: the day is its open "period" here
	clock := sc.End().Add(2*time.Hour + 30*time.Second)
	cfg := service.Passes{Delay: 30 * time.Second, Lookback: 10 * time.Minute, Backfill: time.Hour, MaxRecompute: 31 * 24 * time.Hour, MaxMinutes: 60,
		OpenFrom: func(time.Time) time.Time { return day.Add(-2 * time.Hour) }}
	r := service.NewRunner(conn, sc.Book, cfg, nil, slog.New(slog.DiscardHandler))
	r.SetClock(func() time.Time { return clock })

	// First pass: a live turn, the hour of --attribution.backfill; the four hours before it
	// are recorded and wait for the next.
	p, err := r.Once(ctx)
	backfillFrom := day.Add(-2 * time.Hour)
	if err != nil || !p.From.Equal(clock.Add(-time.Hour-30*time.Second)) || p.Fresh != 60 || !p.Behind {
		t.Fatalf("first pass %+v, %v: want the live hour, behind", p, err)
	}
	if got := r.Backfill(); got != 240 {
		t.Errorf("backfill minutes left: %d, want 240 (two hours before the day, the scenario's hour, the hour after it)", got)
	}
	live := 0
	for i := 0; p.Behind; i++ {
		clock = clock.Add(time.Minute) // a fresh minute closes at every pass
		if p, err = r.Once(ctx); err != nil {
			t.Fatal(err)
		}
		if p.Fresh > 0 {
			live++
			if p.Recomputed+p.Fresh > 11 {
				t.Errorf("a live turn attributed %+v: want the lookback and the fresh minute only", p)
			}
		}
		if i > 20 {
			t.Fatalf("still behind after %d passes: %+v", i, p)
		}
	}
	if live < 3 {
		t.Errorf("%d live turns during the backfill of 4 hours at 60 minutes a pass: want one between two turns of the backlog", live)
	}
	if got := r.Backfill(); got != 0 {
		t.Errorf("backfill minutes left at the end: %d", got)
	}
	checkSums(t, conn, sc.Book, backfillFrom, clock.Add(-time.Minute).Truncate(time.Minute))
	if open, err := stored.OpenRecomputations(ctx, conn); err != nil || len(open) != 0 {
		t.Errorf("recomputations not done: %+v, %v", open, err)
	}
}
