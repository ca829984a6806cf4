package service_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/period"
	"github.com/slicemeter/slicemeter/attribution/service"
	"github.com/slicemeter/slicemeter/attribution/stored"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
	"github.com/slicemeter/slicemeter/schemas/scenario"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// killedBeforeProgress is a connection whose process dies after the pass stored its minutes
// and before it records how far the recomputation came (the kill -9 between the two).
type killedBeforeProgress struct{ driver.Conn }

var errKilled = errors.New("killed")

func (c killedBeforeProgress) PrepareBatch(ctx context.Context, query string, opts ...driver.PrepareBatchOption) (driver.Batch, error) {
	if strings.Contains(query, "INSERT INTO recomputations") {
		return nil, errKilled
	}
	return c.Conn.PrepareBatch(ctx, query, opts...)
}

// TestRecomputationSurvivesRestarts: an allocation ended early and another created from then on
// the same GPU, received long after its minutes were stored, need several passes (10 minutes a
// pass). The runner is dropped after the first pass (a restart), the next is killed between
// storing its minutes and recording its progress, and a third finishes: every stored minute
// then bills what the raw samples do, none is missing, and while it ran the stale minutes
// gauge said so and the period was not closed. Then holes: stored minutes deleted are found,
// shown as missing and attributed again.
func TestRecomputationSurvivesRestarts(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("attributes an hour of minutes into ClickHouse, several times")
	}
	ctx := context.Background()
	sc, err := scenario.Load(filepath.Join("..", "..", "schemas", "scenario", "testdata", "mig-basic.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	conn := chtest.NewDatabase(t, nil)
	// Received in simulated time, as a live service would have them: a restarted runner takes
	// for late only what was received after the last stored pass.
	chtest.Simulate(t, sc, func(node string, samples []*pb.Sample) { chtest.InsertSamples(t, conn, node, samples) })
	insertReceived(t, conn, sc.Start, chtest.ScenarioAllocations(sc))
	book := sc.Book
	clock := sc.End().Add(30 * time.Second)
	runner := func(c driver.Conn, maxMinutes int) *service.Runner {
		cfg := service.Passes{Delay: 30 * time.Second, Lookback: 10 * time.Minute, Backfill: time.Hour, MaxRecompute: 24 * time.Hour, MaxMinutes: maxMinutes}
		r := service.NewRunner(c, book, cfg, nil, slog.New(slog.DiscardHandler))
		r.SetClock(func() time.Time { return clock })
		return r
	}
	if p, err := runner(conn, 120).Once(ctx); err != nil || p.Fresh != 60 {
		t.Fatalf("first pass %+v, %v: want the scenario's 60 minutes", p, err)
	}

	// gamma's whole GPU ends at 5m; delta's starts then: both received now.
	var gamma chtest.AllocationRow
	for _, a := range chtest.ScenarioAllocations(sc) {
		if a.Tenant == "gamma" {
			gamma = a
		}
	}
	change := sc.Start.Add(5 * time.Minute)
	ended := gamma
	ended.Ended, ended.Version = change, 2
	insertReceived(t, conn, clock.Add(30*time.Second), []chtest.AllocationRow{ended, {ID: "late-delta", Tenant: "delta", Tier: gamma.Tier, Node: gamma.Node,
		Instance: gamma.Instance, Requested: change, Started: change, Ended: sc.End(), Version: 1}})
	clock = clock.Add(time.Minute)

	// Restart 1: a pass of 10 minutes, then the runner is dropped. The recomputation starts
	// where the changed allocations start: gamma's, at the scenario's start.
	redo := sc.Start
	r := runner(conn, 10)
	p, err := r.Once(ctx)
	if err != nil || !p.From.Equal(redo) || !p.To.Equal(redo.Add(10*time.Minute)) {
		t.Fatalf("pass after the change %+v, %v: want [%s, +10m)", p, err, redo)
	}
	if stale, _ := r.Owed(); stale != 50 {
		t.Errorf("stale minutes after the first pass: %d, want 50 (of the hour)", stale)
	}
	feb := period.Of(sc.Start, book.Zone())
	closer := period.Closer{Conn: conn, Book: book}
	if _, err := closer.Close(ctx, feb, sc.Start.AddDate(0, 2, 0)); !errors.Is(err, period.ErrOwed) {
		t.Errorf("closing %s while its minutes are stale: %v, want %v", feb, err, period.ErrOwed)
	}

	// Restart 2: killed after storing [10m, 20m), before recording it.
	if p, err := runner(killedBeforeProgress{conn}, 10).Once(ctx); !errors.Is(err, errKilled) || !p.From.Equal(redo.Add(10*time.Minute)) {
		t.Fatalf("the pass killed before its progress: %+v, %v; want it to resume at %s", p, err, redo.Add(10*time.Minute))
	}

	// Restart 3: resumes at 10m again and finishes.
	r = runner(conn, 10)
	for i := 0; ; i++ {
		p, err := r.Once(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 && !p.From.Equal(redo.Add(10*time.Minute)) {
			t.Errorf("the restarted recomputation begins at %s, want %s", p.From, redo.Add(10*time.Minute))
		}
		if stale, missing := r.Owed(); stale == 0 && missing == 0 {
			break
		}
		if i == 10 {
			t.Fatalf("still recomputing after %d passes: %+v", i+1, p)
		}
	}
	everyMinuteMatches(t, conn, book, sc.Start, sc.End())
	if open, err := stored.OpenRecomputations(ctx, conn); err != nil || len(open) != 0 {
		t.Errorf("recomputations not done after the last pass: %+v, %v", open, err)
	}

	// Holes: two runs of stored minutes deleted, 40 minutes apart.
	holes := [][2]time.Time{{sc.Start.Add(2 * time.Minute), sc.Start.Add(4 * time.Minute)}, {sc.Start.Add(42 * time.Minute), sc.Start.Add(45 * time.Minute)}}
	for _, h := range holes {
		deleteMinutes(t, conn, h[0], h[1])
	}
	if _, err := stored.FromMinutes(ctx, conn, sc.Start, sc.End()); !errors.Is(err, stored.ErrNotAttributed) {
		t.Fatalf("the stored minutes with holes: %v, want %v", err, stored.ErrNotAttributed)
	}
	r = runner(conn, 10)
	if p, err := r.Once(ctx); err != nil || !p.From.Equal(holes[0][0]) {
		t.Fatalf("the pass after the holes: %+v, %v; want it to begin at the first hole, %s", p, err, holes[0][0])
	}
	if _, missing := r.Owed(); missing != 3 {
		t.Errorf("missing minutes after a pass that attributed the first hole: %d, want the second's 3", missing)
	}
	for i := 0; ; i++ {
		if _, missing := r.Owed(); missing == 0 {
			break
		}
		if _, err := r.Once(ctx); err != nil {
			t.Fatal(err)
		}
		if i == 10 {
			t.Fatal("holes still missing after 10 passes")
		}
	}
	everyMinuteMatches(t, conn, book, sc.Start, sc.End())
}

// everyMinuteMatches checks every minute of [from, to): stored, and summing to the raw report.
func everyMinuteMatches(t *testing.T, conn driver.Conn, book *pricebook.PriceBook, from, to time.Time) {
	t.Helper()
	if err := stored.CheckAttributed(context.Background(), conn, from, to); err != nil {
		t.Errorf("stored minutes missing: %v", err)
	}
	for m := from; m.Before(to); m = m.Add(time.Minute) {
		checkSums(t, conn, book, m, m.Add(time.Minute))
	}
}

// insertReceived inserts allocations as received at the time given.
func insertReceived(t *testing.T, conn driver.Conn, received time.Time, rows []chtest.AllocationRow) {
	t.Helper()
	ctx := context.Background()
	batch, err := conn.PrepareBatch(ctx, tables.Insert(tables.Allocations, tables.AllocationColumns))
	if err != nil {
		t.Fatal(err)
	}
	ns := func(t time.Time) int64 {
		if t.IsZero() {
			return 0
		}
		return t.UnixNano()
	}
	for _, r := range rows {
		if err := batch.Append(r.ID, r.Tenant, r.Tier, r.Node, r.Instance, ns(r.Requested), ns(r.Started), ns(r.Ended), r.Version, uint8(0),
			received.UTC().Truncate(time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
}

// deleteMinutes deletes every stored row of [from, to) and waits for the mutation.
func deleteMinutes(t *testing.T, conn driver.Conn, from, to time.Time) {
	t.Helper()
	ctx := context.Background()
	where := fmt.Sprintf("minute >= toDateTime(%d) AND minute < toDateTime(%d)", from.Unix(), to.Unix())
	if err := conn.Exec(ctx, "ALTER TABLE attribution_minutes DELETE WHERE "+where); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		var n uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM attribution_minutes WHERE "+where).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if i == 600 {
			t.Fatalf("%d rows of [%s, %s) still there after a minute", n, from, to)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestRecomputationSurvivesRebalance: with replicas sharing the nodes, the replica owning
// node-a records the recomputation of a late change (naming node-a) and does one pass of it;
// it then dies, and the replica that takes node-a over resumes the record where the first left
// it and finishes: every stored minute bills what the raw samples do.
func TestRecomputationSurvivesRebalance(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("attributes an hour of minutes into ClickHouse, several times")
	}
	ctx := context.Background()
	sc, err := scenario.Load(filepath.Join("..", "..", "schemas", "scenario", "testdata", "mig-basic.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	conn := chtest.NewDatabase(t, nil)
	chtest.Simulate(t, sc, func(node string, samples []*pb.Sample) { chtest.InsertSamples(t, conn, node, samples) })
	insertReceived(t, conn, sc.Start, chtest.ScenarioAllocations(sc))
	book := sc.Book
	clock := sc.End().Add(30 * time.Second)
	replica := func(shards service.Shards) *service.Runner {
		cfg := service.Passes{Delay: 30 * time.Second, Lookback: 10 * time.Minute, Backfill: time.Hour, MaxRecompute: 24 * time.Hour, MaxMinutes: 10,
			Shards: shards}
		r := service.NewRunner(conn, book, cfg, nil, slog.New(slog.DiscardHandler))
		r.SetClock(func() time.Time { return clock })
		return r
	}
	// Two replicas; the one that owns node-a (the scenario's only node) attributes the hour.
	owner, other := &hashShards{index: 0, n: 2}, &hashShards{index: 1, n: 2}
	if a, _ := owner.Assignment(); !a.Owns("node-a") {
		owner, other = other, owner
	}
	first := replica(owner)
	for i := 0; ; i++ {
		p, err := first.Once(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !p.To.Before(sc.End()) {
			break
		}
		if i == 10 {
			t.Fatalf("the hour not attributed after %d passes: %+v", i+1, p)
		}
	}
	var gamma chtest.AllocationRow
	for _, a := range chtest.ScenarioAllocations(sc) {
		if a.Tenant == "gamma" {
			gamma = a
		}
	}
	change := sc.Start.Add(5 * time.Minute)
	ended := gamma
	ended.Ended, ended.Version = change, 2
	insertReceived(t, conn, clock.Add(30*time.Second), []chtest.AllocationRow{ended, {ID: "late-delta", Tenant: "delta", Tier: gamma.Tier, Node: gamma.Node,
		Instance: gamma.Instance, Requested: change, Started: change, Ended: sc.End(), Version: 1}})
	clock = clock.Add(time.Minute)
	if p, err := first.Once(ctx); err != nil || !p.From.Equal(sc.Start) {
		t.Fatalf("the owner's pass after the change: %+v, %v; want it to begin at %s", p, err, sc.Start)
	}
	open, err := stored.OpenRecomputations(ctx, conn)
	if err != nil || len(open) != 1 || strings.Join(open[0].Nodes, ",") != "node-a" || !open[0].NodeNext("node-a").Equal(sc.Start.Add(10*time.Minute)) {
		t.Fatalf("the recomputation recorded: %+v, %v; want one of node-a, come to %s", open, err, sc.Start.Add(10*time.Minute))
	}

	// The owner dies; the other replica takes every node over (a new generation).
	other.all, other.generation = true, 1
	second := replica(other)
	for i := 0; ; i++ {
		p, err := second.Once(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 && !p.From.Equal(sc.Start.Add(10*time.Minute)) {
			t.Errorf("the replica that took node-a over begins at %s, want %s", p.From, sc.Start.Add(10*time.Minute))
		}
		if stale, missing := second.Owed(); stale == 0 && missing == 0 {
			break
		}
		if i == 10 {
			t.Fatalf("still recomputing after %d passes: %+v", i+1, p)
		}
	}
	everyMinuteMatches(t, conn, book, sc.Start, sc.End())
}
