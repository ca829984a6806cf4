package collector

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"google.golang.org/protobuf/proto"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// fullRow is every column of a samples_1s or samples_1m row.
type fullRow struct {
	Time          time.Time `ch:"time"`
	Node          string    `ch:"node"`
	InstanceID    string    `ch:"instance_id"`
	GPUUUID       string    `ch:"gpu_uuid"`
	GPUIndex      uint32    `ch:"gpu_index"`
	Model         string    `ch:"model"`
	Kind          string    `ch:"kind"`
	Profile       string    `ch:"profile"`
	ComputeSlices uint32    `ch:"compute_slices"`
	SMCount       uint32    `ch:"sm_count"`
	GPUSMCount    uint32    `ch:"gpu_sm_count"`
	MemTotal      uint64    `ch:"mem_total_bytes"`
	GPUMemTotal   uint64    `ch:"gpu_mem_total_bytes"`
	IntervalNs    uint64    `ch:"interval_ns"`
	Samples       uint64    `ch:"samples"`
	CoveredNs     uint64    `ch:"covered_ns"`
	SMSum         float64   `ch:"sm_active_sum"`
	AttachedSum   uint64    `ch:"attached_sum"`
	SwitchSum     uint64    `ch:"vgpu_switch_ns_sum"`
	RunSum        uint64    `ch:"vgpu_run_ns_sum"`
	FirstAttached uint64    `ch:"first_attached_ns"`
	MemSum        float64   `ch:"mem_used_bytes_sum"`
	PowerSum      float64   `ch:"power_watts_sum"`
	WaitNs        []uint64  `ch:"wait_ns"`
	WaitCount     []uint64  `ch:"wait_count"`
	ActiveSamples uint64    `ch:"active_samples"`
	ActiveNs      uint64    `ch:"active_ns"`
	FirstNs       uint64    `ch:"first_ns"`
	LastNs        uint64    `ch:"last_ns"`
	SMNs          float64   `ch:"sm_active_ns"`
	SwitchNs      float64   `ch:"switch_ns"`
	ShareReplicas uint32    `ch:"share_replicas"`
	MemMax        uint64    `ch:"mem_used_max_bytes"`
	Energy        float64   `ch:"energy_j_sum"`
	EnergyEst     uint64    `ch:"energy_estimated_samples"`
}

// readFull returns the row of every key of table that readers take (FINAL: the fullest, of
// equals the last written), in key order.
func readFull(t testing.TB, ctx context.Context, conn driver.Conn, table string) []fullRow {
	t.Helper()
	var rows []fullRow
	if err := conn.Select(ctx, &rows, `SELECT `+tables.List(tables.RollupColumns)+` FROM `+table+` FINAL ORDER BY node, instance_id, time`); err != nil {
		t.Fatalf("read %s: %v", table, err)
	}
	for i := range rows {
		rows[i].Time = rows[i].Time.UTC()
	}
	return rows
}

// diffRows describes the first differences between got and want ("" if none).
func diffRows(table string, got, want []fullRow) string {
	var b strings.Builder
	if len(got) != len(want) {
		fmt.Fprintf(&b, "%s: %d rows, want %d\n", table, len(got), len(want))
	}
	n := 0
	for i := 0; i < min(len(got), len(want)) && n < 5; i++ {
		if !reflect.DeepEqual(got[i], want[i]) {
			fmt.Fprintf(&b, "%s row %d:\n got %+v\nwant %+v\n", table, i, got[i], want[i])
			n++
		}
	}
	return b.String()
}

// fuzzBatch is one flush's samples.
type fuzzBatch []struct {
	node string
	s    *pb.Sample
}

// fuzzBatches generates the samples of two nodes (a whole GPU, a vGPU and a MIG instance each)
// at 10 Hz across two minute boundaries, in messages of a random number of ticks, then
// interleaves: messages delivered again (some with other values: the last received wins),
// late (a few positions back), with a clock step (a tick 37 ms late) or another interval
// (150 ms), and cut into flushes of 1 to 6 messages.
func fuzzBatches(rng *rand.Rand) []fuzzBatch {
	type msg fuzzBatch
	var msgs []msg
	start := (base/1e9/60+1)*60*1e9 - 20e9 + uint64(rng.IntN(1000))*1e6 // 20 s before a minute, any phase
	const ticks = 900
	for _, node := range []string{"fz-a", "fz-b"} {
		for tick := 0; tick < ticks; {
			n := 1 + rng.IntN(40)
			var m msg
			for ; n > 0 && tick < ticks; n, tick = n-1, tick+1 {
				ts := start + uint64(tick)*1e8
				for j, kind := range []pb.Kind{pb.Kind_KIND_GPU, pb.Kind_KIND_VGPU, pb.Kind_KIND_MIG} {
					s := sample(kind, fmt.Sprintf("gpu%d/x", j), ts)
					s.SmActive = float64(rng.IntN(1000)) / 999
					s.MemUsedBytes = uint64(1+rng.IntN(19)) << 30
					s.PowerWatts = 100 + rng.Float64()*300
					// The GPU's energy counter, read at both ends of most ticks; some have no
					// previous reading, a counter that cannot be read, or one that was reset.
					s.EnergyPrevMj = 5_000_000 + uint64(tick)*40_000
					s.EnergyMj = s.EnergyPrevMj + uint64(10_000+rng.IntN(30_000))
					switch rng.IntN(20) {
					case 0:
						s.EnergyPrevMj = 0
					case 1:
						s.EnergyUnavailable, s.EnergyMj = true, 0
					case 2:
						s.EnergyMj = uint64(rng.IntN(30_000))
					}
					s.Attached = rng.IntN(10) > 0
					if kind == pb.Kind_KIND_MIG && rng.IntN(5) == 0 {
						s.SmActiveUnavailable = true
					}
					if s.Vgpu != nil {
						s.Vgpu.WaitsNs = []uint64{uint64(rng.IntN(3)) * 1000, 6_000_000}
						s.Vgpu.SwitchNs = uint64(rng.IntN(50_000))
					}
					switch rng.IntN(200) {
					case 0:
						s.TsNs += 37e6 // a clock step
					case 1:
						s.IntervalNs = 150e6
					}
					m = append(m, struct {
						node string
						s    *pb.Sample
					}{node, s})
				}
			}
			msgs = append(msgs, m)
		}
	}
	// Interleave the nodes, as partitions would, each node's messages in order.
	half := 0
	for half < len(msgs) && msgs[half][0].node == "fz-a" {
		half++
	}
	var mixed []msg
	for a, b := 0, half; a < half || b < len(msgs); {
		if a < half && (b >= len(msgs) || rng.IntN(2) == 0) {
			mixed, a = append(mixed, msgs[a]), a+1
		} else {
			mixed, b = append(mixed, msgs[b]), b+1
		}
	}
	var out []msg
	original := len(mixed)
	for i := 0; i < len(mixed); i++ {
		if i < original {
			switch rng.IntN(12) {
			case 0: // delivered again later, unchanged
				mixed = append(mixed, mixed[i])
			case 1: // delivered again later with other values
				again := make(msg, len(mixed[i]))
				for j, x := range mixed[i] {
					s := proto.Clone(x.s).(*pb.Sample)
					s.SmActive = 1 - s.SmActive
					s.EnergyMj += 7 // another reading: the one received last wins here too
					again[j].node, again[j].s = x.node, s
				}
				mixed = append(mixed, again)
			case 2: // late: swapped with one of the next messages
				if k := i + 1 + rng.IntN(4); k < original {
					mixed[i], mixed[k] = mixed[k], mixed[i]
				}
			}
		}
		out = append(out, mixed[i])
	}
	var batches []fuzzBatch
	for i := 0; i < len(out); {
		var b fuzzBatch
		for n := 1 + rng.IntN(6); n > 0 && i < len(out); n, i = n-1, i+1 {
			b = append(b, out[i]...)
		}
		batches = append(batches, b)
	}
	return batches
}

// storeBatch inserts a batch's raw rows and rolls them up as a flush does.
func storeBatch(t testing.TB, ctx context.Context, c *Collector, b fuzzBatch) {
	t.Helper()
	var cols sampleColumns
	for _, x := range b {
		cols.add(x.node, x.s)
	}
	if err := insertColumns(ctx, c.conn, tables.Samples, tables.SampleColumns, cols.columns()); err != nil {
		t.Fatal(err)
	}
	if err := c.rollupInMemory(ctx, &cols); err != nil {
		t.Fatal(err)
	}
}

func newTestCollector(t testing.TB, conn driver.Conn) *Collector {
	t.Helper()
	c, err := New(Config{Brokers: []string{"unused:9092"}}, conn, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestRollupInMemoryEqualsRecomputed interleaves late, duplicate (equal and conflicting),
// out-of-order and irregular samples in random flushes, with restarts between some of them,
// and checks that the rollup rows the collector wrote (in memory where it could, recomputed
// where it had to) are those recomputed from all the raw rows at the end, column for column.
func TestRollupInMemoryEqualsRecomputed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	seeds := []uint64{1, 2, 3}
	if testing.Short() {
		seeds = seeds[:1]
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			got := localtest.Database(t, localtest.DatabaseOptions{}).Conn
			want := localtest.Database(t, localtest.DatabaseOptions{Name: localtest.DatabaseName(t) + "_want"}).Conn
			rng := rand.New(rand.NewPCG(seed, 28))
			c := newTestCollector(t, got)
			restarts := 0
			var stats rollupStats
			add := func() {
				stats.memorySeconds += c.rollupStats.memorySeconds
				stats.memoryMinutes += c.rollupStats.memoryMinutes
				stats.recomputedSeconds += c.rollupStats.recomputedSeconds
				stats.recomputedMinutes += c.rollupStats.recomputedMinutes
			}
			for _, b := range fuzzBatches(rng) {
				storeBatch(t, ctx, c, b)
				var cols sampleColumns
				for _, x := range b {
					cols.add(x.node, x.s)
				}
				if err := insertColumns(ctx, want, tables.Samples, tables.SampleColumns, cols.columns()); err != nil {
					t.Fatal(err)
				}
				if rng.IntN(8) == 0 { // a restart: nothing remembered
					add()
					c = newTestCollector(t, got)
					restarts++
				}
			}
			add()
			for _, q := range []string{tables.RollupSeconds("1", "1"), tables.RollupMinutes("1")} {
				if err := want.Exec(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			for _, table := range []string{tables.Samples1s, tables.Samples1m} {
				if d := diffRows(table, readFull(t, ctx, got, table), readFull(t, ctx, want, table)); d != "" {
					t.Error(d)
				}
			}
			t.Logf("%d restarts; rollups %+v", restarts, stats)
			if st := stats; st.memorySeconds == 0 || st.recomputedSeconds == 0 || st.memoryMinutes == 0 || st.recomputedMinutes == 0 {
				t.Errorf("rows in memory and recomputed: %+v, want some of each", st)
			}
		})
	}
}

// TestRedeliveredBatchChangesNothing stores batches whose rollup rows are computed in memory,
// then delivers one of them again to the same collector and, after a restart, to a new one:
// every rollup row stays the same, column for column.
func TestRedeliveredBatchChangesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn := localtest.Database(t, localtest.DatabaseOptions{}).Conn
	// Three flushes of one node, 10 s each, starting 0.7 s into a second: each flush's first
	// second is the last one of the flush before.
	var batches []fuzzBatch
	for f := range 3 {
		var b fuzzBatch
		for tick := range 100 {
			ts := base + uint64(f*100+tick)*1e8
			for _, s := range []*pb.Sample{sample(pb.Kind_KIND_GPU, "gpu0", ts), sample(pb.Kind_KIND_VGPU, "gpu1/vgpu0", ts)} {
				s.SmActive = float64((f*100+tick)%7) / 7
				b = append(b, struct {
					node string
					s    *pb.Sample
				}{"redeliver", s})
			}
		}
		batches = append(batches, b)
	}
	c := newTestCollector(t, conn)
	for _, b := range batches {
		storeBatch(t, ctx, c, b)
	}
	if len(c.tails) != 2 {
		t.Fatalf("the collector remembers %d instances, want 2: the rows were not computed in memory", len(c.tails))
	}
	var rowsIn []int
	for _, table := range []string{tables.Samples1s, tables.Samples1m} {
		var n uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM "+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		rowsIn = append(rowsIn, int(n))
	}
	before := map[string][]fullRow{}
	for _, table := range []string{tables.Samples1s, tables.Samples1m} {
		before[table] = readFull(t, ctx, conn, table)
	}
	check := func(when string) {
		t.Helper()
		for _, table := range []string{tables.Samples1s, tables.Samples1m} {
			if d := diffRows(table, readFull(t, ctx, conn, table), before[table]); d != "" {
				t.Errorf("%s:\n%s", when, d)
			}
		}
	}
	storeBatch(t, ctx, c, batches[1])
	check("the middle flush delivered again")
	storeBatch(t, ctx, c, batches[2])
	check("the last flush delivered again")
	c = newTestCollector(t, conn) // a restart
	storeBatch(t, ctx, c, batches[2])
	check("the last flush delivered again after a restart")
	storeBatch(t, ctx, c, batches[0])
	check("the first flush delivered again after a restart")
	// Rows written in memory: one samples_1s row per second (plus the rewrites of the flush
	// boundaries' seconds), not one per recomputation.
	if rowsIn[0] > 2*(31+2) {
		t.Errorf("%d samples_1s rows for 2 instances over 31 seconds", rowsIn[0])
	}
}

// BenchmarkRollupCompute measures the rollup rows computed in memory for a flush of 200,000
// samples (1,000 nodes' 10 s of 7 instances... in parts of 285 nodes, as the ingest benchmark's
// flushes), without ClickHouse.
func BenchmarkRollupCompute(b *testing.B) {
	var cols sampleColumns
	for m := range 285 {
		node := fmt.Sprintf("node-%04d", m)
		for i := range 7 {
			kind := pb.Kind_KIND_MIG
			if i >= 4 {
				kind = pb.Kind_KIND_VGPU
			}
			id := fmt.Sprintf("gpu%d/x%d", i/4, i)
			for tick := range 100 {
				cols.add(node, sample(kind, id, base+uint64(tick)*1e8))
			}
		}
	}
	var secCols, minCols rollupColumns
	b.ResetTimer()
	for range b.N {
		secCols.reset()
		minCols.reset()
		var exactSecs, exactMins touched
		for _, g := range groupSamples(&cols) {
			g.mode = modeFresh
			g.build(&cols, nil)
			g.emit(nil, nil, &secCols, &minCols, &exactSecs, &exactMins)
		}
	}
	b.ReportMetric(float64(cols.len()*b.N)/b.Elapsed().Seconds(), "samples/s")
}
