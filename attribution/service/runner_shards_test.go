package service_test

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/report"
	"github.com/slicemeter/slicemeter/attribution/service"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/attribution/stored"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
	"github.com/slicemeter/slicemeter/schemas/scenario"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// hashShards is a static Shards: replica index of n owns the nodes whose FNV-1a hash is index
// mod n, or every node once all is set (it took over the others); generation counts changes.
type hashShards struct {
	index, n   int
	all        bool
	generation int64
}

func (s *hashShards) Assignment() (service.Assignment, bool) {
	return service.Assignment{Generation: s.generation, Owns: func(node string) bool {
		h := fnv.New32a()
		h.Write([]byte(node))
		return s.all || int(h.Sum32()%uint32(s.n)) == s.index
	}}, true
}

// replicaRun is how a run of the shards scenario goes: n replicas (0: one runner without
// Shards); with kill, replica 1's pass at step killAt is cancelled after two minutes and it
// never runs again, and replica 0 takes over every node at step takeOver.
type replicaRun struct {
	n                int
	kill             bool
	killAt, takeOver int
}

// TestReplicasStoreTheMinutesOfOne: the shards scenario (four nodes, MIG, whole GPUs and vGPUs,
// allocations starting and ending, one moving from node-a to node-b, one arriving late on
// node-c) attributed pass by pass by one runner, by 2 and by 3 replicas sharing the nodes by
// hash (each replica's pass in turn, one database), and by 2 replicas of which one is killed
// mid-pass and the other takes its nodes over 8 minutes later (past the lookback, and after
// the late allocation arrived for one of them): the stored minutes (their latest passes, every
// column but computed_ns) are identical, and so are the reports from them, which keep the
// invariants and read the whole hour from its roll-up, and equal the report from the samples.
func TestReplicasStoreTheMinutesOfOne(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("attributes half an hour of four nodes into ClickHouse several times")
	}
	sc, err := scenario.Load(filepath.Join("testdata", "shards.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	book := sc.Book
	hour := sc.Start.Truncate(time.Hour)
	from, to := hour, sc.End() // a whole hour (rolled up) and 10 minutes
	one, oneReport := runReplicas(t, sc, book, replicaRun{n: 0}, from, to)
	if len(one) < 100 {
		t.Fatalf("one runner stored %d rows: want the scenario's minutes", len(one))
	}
	direct, err := attribution.Report(context.Background(), chtestConn(t, sc), book, attribution.Options{From: from, To: to, Now: to.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if got := csvOf(t, direct.Report); got != oneReport {
		t.Errorf("one runner's stored minutes report\n%s\nthe samples'\n%s", oneReport, got)
	}
	for _, c := range []replicaRun{{n: 2}, {n: 3}, {n: 2, kill: true, killAt: 3, takeOver: 7}} {
		t.Run(fmt.Sprintf("replicas=%d kill=%v", c.n, c.kill), func(t *testing.T) {
			t.Parallel()
			rows, rep := runReplicas(t, sc, book, c, from, to)
			if rep != oneReport {
				t.Errorf("report from the stored minutes\n%s\none runner's\n%s", rep, oneReport)
			}
			if len(rows) != len(one) {
				t.Errorf("%d rows stored, one runner %d", len(rows), len(one))
			}
			for i := range min(len(rows), len(one)) {
				if rows[i] != one[i] {
					t.Fatalf("row %d:\n %s\none runner:\n %s", i, rows[i], one[i])
				}
			}
		})
	}
}

// chtestConn is a database with the scenario's samples and allocations alone, for the report
// from the samples (with the allocation that moved and the late one).
func chtestConn(t *testing.T, sc *scenario.Scenario) driver.Conn {
	conn := chtest.NewDatabase(t, nil)
	chtest.InsertScenario(t, conn, sc)
	chtest.InsertAllocations(t, conn, []chtest.AllocationRow{moved(sc), lateAllocation(sc)})
	return conn
}

// moved is gamma's whole GPU on node-a as it moves to node-b's (ending before delta's starts).
func moved(sc *scenario.Scenario) chtest.AllocationRow {
	return chtest.AllocationRow{ID: "gamma-0", Tenant: "gamma", Tier: "pro", Node: "node-b", Instance: "gpu0",
		Requested: sc.Start, Started: sc.Start.Add(5 * time.Second), Ended: sc.Start.Add(11 * time.Minute), Version: 2}
}

// lateAllocation arrives 15 minutes after it started.
func lateAllocation(sc *scenario.Scenario) chtest.AllocationRow {
	return chtest.AllocationRow{ID: "late-1", Tenant: "late", Tier: "budget", Node: "node-c", Instance: "gpu0/mig1",
		Requested: sc.Start.Add(4 * time.Minute), Started: sc.Start.Add(4 * time.Minute), Ended: sc.Start.Add(25 * time.Minute), Version: 1}
}

// runReplicas attributes the scenario as c says, into a database of its own, and returns the
// stored minutes' rows and the CSV of the report of [from, to) from them.
func runReplicas(t *testing.T, sc *scenario.Scenario, book *pricebook.PriceBook, c replicaRun, from, to time.Time) ([]string, string) {
	t.Helper()
	conn := chtest.NewDatabase(t, nil)
	chtest.InsertScenario(t, conn, sc)
	cfg := service.Passes{Delay: 30 * time.Second, Lookback: 5 * time.Minute, Backfill: 50 * time.Minute, MaxRecompute: 2 * time.Hour, MaxMinutes: 120}
	var (
		runners []*service.Runner
		shards  []*hashShards
		clock   time.Time
	)
	for i := range max(c.n, 1) {
		cfg := cfg
		if c.n > 0 {
			s := &hashShards{index: i, n: c.n, generation: 1}
			shards, cfg.Shards = append(shards, s), s
		}
		r := service.NewRunner(conn, book, cfg, nodeSums{t}, slog.New(slog.DiscardHandler))
		r.SetClock(func() time.Time { return clock })
		runners = append(runners, r)
	}
	dead := map[int]bool{}
	spent, attributed := make([]time.Duration, len(runners)), make([]int, len(runners)) // per replica, logged
	// A pass every 2 minutes from minute 10 to the end (the lookback covers the minutes between).
	for step := 0; step <= 10; step++ {
		clock = sc.Start.Add(10*time.Minute + 30*time.Second + time.Duration(2*step)*time.Minute)
		switch step {
		case 2:
			chtest.InsertAllocations(t, conn, []chtest.AllocationRow{moved(sc)})
		case 5:
			chtest.InsertAllocations(t, conn, []chtest.AllocationRow{lateAllocation(sc)})
		}
		if c.kill && step == c.takeOver {
			shards[0].all, shards[0].generation = true, 2
		}
		for i, r := range runners {
			if dead[i] {
				continue
			}
			ctx, cancel := context.WithCancel(context.Background())
			if c.kill && i == 1 && step == c.killAt {
				computed := 0
				r.SetReport(func(ctx context.Context, q store.Querier, b *pricebook.PriceBook, o attribution.Options) (attribution.Result, error) {
					if computed++; computed > 2 {
						cancel()
					}
					return attribution.Report(ctx, q, b, o)
				})
				if _, err := r.Once(ctx); err == nil {
					t.Fatalf("replica 1's pass at step %d: cancelled after two minutes, yet no error", step)
				}
				dead[i] = true
				cancel()
				continue
			}
			began := time.Now()
			p, err := r.Once(ctx)
			spent[i] += time.Since(began)
			attributed[i] += p.Fresh + p.Recomputed
			cancel()
			if err != nil || p.Violations > 0 || len(p.Failed) > 0 {
				t.Fatalf("replica %d of %d, step %d: %+v, %v", i, c.n, step, p, err)
			}
		}
	}
	for i := range runners {
		t.Logf("replica %d of %d: %d minutes attributed in %s", i, max(c.n, 1), attributed[i], spent[i].Round(time.Millisecond))
	}
	ctx := context.Background()
	rep, err := stored.FromMinutes(ctx, conn, from, to)
	if err != nil {
		t.Fatal(err)
	}
	if errs := billing.CheckInvariants(rep); len(errs) > 0 {
		t.Errorf("invariants of the report from the stored minutes: %v", errs)
	}
	checkRolledUp(t, conn, from.Truncate(time.Hour))
	return storedRows(t, conn, from, to), csvOf(t, rep)
}

// nodeSums is an Observer that checks each minute's unallocated list cost per node against the
// whole: capacity − Σ tenants = Σ nodes' unallocated, of the replica's nodes.
type nodeSums struct{ t *testing.T }

func (o nodeSums) Minute(m stored.Minute, _ bool, _ []error) {
	sum := 0.
	for _, v := range m.Report.UnallocatedByNode {
		sum += v
	}
	if math.Abs(sum-m.Report.UnallocatedListCost) > billing.Tolerance {
		o.t.Errorf("minute %s: unallocated %.9f, its nodes' %.9f", m.Start.Format(time.RFC3339), m.Report.UnallocatedListCost, sum)
	}
}

// checkRolledUp fails unless the hour's latest roll-up is of the minutes stored now (what
// readers check before they read it): the last replica to write rolled up every replica's.
func checkRolledUp(t *testing.T, conn driver.Conn, hour time.Time) {
	t.Helper()
	ctx := context.Background()
	var computed, minutes, source, sourceMinutes uint64
	f, e := hour.Unix(), hour.Add(time.Hour).Unix()
	if err := conn.QueryRow(ctx, `SELECT max(computed_ns), uniqExact(minute) FROM attribution_minutes WHERE `+tables.MinuteWindow, f, e).Scan(&computed, &minutes); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, `SELECT max(source_ns), argMax(source_minutes, source_ns) FROM attribution_hours WHERE hour = toDateTime(?)`, f).Scan(&source, &sourceMinutes); err != nil {
		t.Fatal(err)
	}
	if computed != source || minutes != sourceMinutes || minutes != 60 {
		t.Errorf("hour %s: stored minutes of pass %d (%d minutes), rolled up from %d (%d): want the roll-up of the last write", hour.Format(time.RFC3339), computed, minutes, source, sourceMinutes)
	}
}

// storedRows are the latest passes' rows of [from, to), every column but computed_ns, in key
// order.
func storedRows(t *testing.T, conn driver.Conn, from, to time.Time) []string {
	t.Helper()
	var cols []string
	for _, c := range tables.AttributionMinuteColumns {
		if c != "computed_ns" {
			cols = append(cols, "toString("+c+")")
		}
	}
	rows, err := conn.Query(context.Background(), `SELECT `+strings.Join(cols, ", ")+` FROM `+tables.AttributionMinutes+`
WHERE `+tables.LatestPass(tables.MinuteWindow)+`
ORDER BY minute, tenant, allocation_id, node`, from.Unix(), to.Unix(), from.Unix(), to.Unix())
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		vals := make([]string, len(cols))
		dst := make([]any, len(cols))
		for i := range vals {
			dst[i] = &vals[i]
		}
		if err := rows.Scan(dst...); err != nil {
			t.Fatal(err)
		}
		out = append(out, strings.Join(vals, " | "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func csvOf(t *testing.T, rep report.Report) string {
	t.Helper()
	var b bytes.Buffer
	if err := rep.WriteCSV(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
