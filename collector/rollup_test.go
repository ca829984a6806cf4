package collector

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/schemas/energy"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

func TestTouchedRanges(t *testing.T) {
	for _, tc := range []struct {
		name    string
		seconds []uint32
		gap     uint32
		want    []secondRange
	}{
		{"none", nil, 60, nil},
		{"one", []uint32{100}, 60, []secondRange{{100, 100}}},
		{"repeated", []uint32{100, 100, 101, 100}, 60, []secondRange{{100, 101}}},
		{"within gap", []uint32{100, 160}, 60, []secondRange{{100, 160}}},
		{"beyond gap", []uint32{100, 161}, 60, []secondRange{{100, 100}, {161, 161}}},
		{"unordered", []uint32{5000, 10, 11, 4990}, 60, []secondRange{{10, 11}, {4990, 5000}}},
		{"gap 0", []uint32{1, 2, 4}, 1, []secondRange{{1, 2}, {4, 4}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tr touched
			tr.addNode("n")
			for _, s := range tc.seconds {
				tr.addSecond(s)
			}
			if got := tr.ranges(tc.gap); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ranges = %v, want %v", got, tc.want)
			}
			tr.reset()
			if !tr.empty() || len(tr.nodes) != 0 {
				t.Errorf("after reset: %+v", tr)
			}
		})
	}
}

// rollupRow is what a test reads back from samples_1s or samples_1m.
type rollupRow struct {
	Time                             time.Time
	Node, InstanceID, Kind           string
	Samples, CoveredNs, AttachedSum  uint64
	SwitchSum, RunSum, FirstAttached uint64
	SMSum                            float64
	WaitNs, WaitCount                []uint64
	ActiveSamples, ActiveNs          uint64
	FirstNs, LastNs                  uint64  // the row's first and last sample
	MemMax                           uint64  // mem_used_max_bytes: the highest memory used
	Energy                           float64 // energy_j_sum
	EnergyEstimated                  uint64  // energy_estimated_samples
}

// readRollup returns the complete (most samples) row of every key of table, in key order.
func readRollup(t testing.TB, ctx context.Context, conn interface {
	Select(ctx context.Context, dest any, query string, args ...any) error
}, table string) []rollupRow {
	t.Helper()
	var rows []struct {
		Time          time.Time `ch:"time"`
		Node          string    `ch:"node"`
		InstanceID    string    `ch:"instance_id"`
		Kind          string    `ch:"kind"`
		Samples       uint64    `ch:"samples"`
		CoveredNs     uint64    `ch:"covered_ns"`
		AttachedSum   uint64    `ch:"attached_sum"`
		SwitchSum     uint64    `ch:"vgpu_switch_ns_sum"`
		RunSum        uint64    `ch:"vgpu_run_ns_sum"`
		FirstAttached uint64    `ch:"first_attached_ns"`
		SMSum         float64   `ch:"sm_active_sum"`
		WaitNs        []uint64  `ch:"wait_ns"`
		WaitCount     []uint64  `ch:"wait_count"`
		ActiveSamples uint64    `ch:"active_samples"`
		ActiveNs      uint64    `ch:"active_ns"`
		FirstNs       uint64    `ch:"first_ns"`
		LastNs        uint64    `ch:"last_ns"`
		MemMax        uint64    `ch:"mem_used_max_bytes"`
		Energy        float64   `ch:"energy_j_sum"`
		EnergyEst     uint64    `ch:"energy_estimated_samples"`
	}
	q := `SELECT time, node, instance_id, kind, samples, covered_ns, attached_sum, vgpu_switch_ns_sum,
        vgpu_run_ns_sum, first_attached_ns, sm_active_sum, wait_ns, wait_count, active_samples, active_ns, first_ns, last_ns, mem_used_max_bytes,
        energy_j_sum, energy_estimated_samples
        FROM (SELECT * FROM ` + table + ` ORDER BY samples DESC LIMIT 1 BY node, instance_id, time)
        ORDER BY node, instance_id, time`
	if err := conn.Select(ctx, &rows, q); err != nil {
		t.Fatalf("read %s: %v", table, err)
	}
	out := make([]rollupRow, len(rows))
	for i, r := range rows {
		out[i] = rollupRow{r.Time.UTC(), r.Node, r.InstanceID, r.Kind, r.Samples, r.CoveredNs, r.AttachedSum,
			r.SwitchSum, r.RunSum, r.FirstAttached, r.SMSum, r.WaitNs, r.WaitCount, r.ActiveSamples, r.ActiveNs, r.FirstNs, r.LastNs, r.MemMax,
			r.Energy, r.EnergyEst}
	}
	return out
}

// TestRollupsExactlyOnce stores samples, stores some of them again (a replay after a crash),
// recomputes after each, and checks the rollups against sums computed here.
func TestRollupsExactlyOnce(t *testing.T) {
	conn := localtest.Database(t, localtest.DatabaseOptions{}).Conn
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Two nodes, 10 Hz, 2.5 minutes starting 0.7 s into a second, so seconds and minutes
	// are partly covered at both ends; gpu0 attaches 3 s in; vGPU waits vary; gpu0's activity
	// cannot be measured in one sample of seven, so some seconds and every minute mix measured
	// and unmeasured samples.
	const n = 1500
	type key struct {
		node, id string
		time     uint64
	}
	wantS := map[key]*rollupRow{}
	var all []struct {
		node string
		s    *pb.Sample
	}
	for _, node := range []string{"node-a", "node-b"} {
		for i := range n {
			ts := base + uint64(i)*100_000_000
			for _, s := range []*pb.Sample{sample(pb.Kind_KIND_GPU, "gpu0", ts), sample(pb.Kind_KIND_VGPU, "gpu1/vgpu0", ts)} {
				s.Attached = s.GetKind() == pb.Kind_KIND_VGPU || i >= 30
				s.SmActive = float64(i%4) / 4
				// Memory rises and falls, so that each second's and minute's highest is
				// one sample's, not the first's or the last's.
				s.MemUsedBytes = uint64(1+(i*37)%11) << 28
				if s.GetKind() == pb.Kind_KIND_GPU && i%7 == 3 {
					// Not measured: whatever sm_active says must stay out of the sums.
					s.SmActive, s.SmActiveUnavailable = 0.9, true
				}
				if s.Vgpu != nil {
					s.Vgpu.WaitsNs = []uint64{6_000_000, 6_000_000 + uint64(i%3)*1000}
				}
				// The GPU's energy counter: 25-29 J a tick, its power changing within the
				// second; not read in one tick of eleven (estimated, as is the first tick,
				// with no previous reading), and reset by a driver reload at tick 500.
				s.PowerWatts = 200 + float64(i%3)*50
				if i > 0 {
					s.EnergyPrevMj = 1_000_000 + uint64(i)*30_000
				}
				s.EnergyMj = 1_000_000 + uint64(i+1)*30_000 - uint64(i%5)*1000
				switch {
				case i%11 == 5:
					s.EnergyUnavailable, s.EnergyMj = true, 0
				case i == 500:
					s.EnergyMj = 20_000
				}
				all = append(all, struct {
					node string
					s    *pb.Sample
				}{node, s})
				k := key{node, s.GetInstanceId(), ts / 1e9}
				r := wantS[k]
				if r == nil {
					r = &rollupRow{Time: time.Unix(int64(k.time), 0).UTC(), Node: node, InstanceID: k.id, Kind: s.GetKind().Label()}
					wantS[k] = r
				}
				r.Samples++
				r.CoveredNs += s.GetIntervalNs()
				if r.FirstNs == 0 || ts < r.FirstNs {
					r.FirstNs = ts
				}
				r.LastNs = max(r.LastNs, ts)
				r.MemMax = max(r.MemMax, s.GetMemUsedBytes())
				j, est := energy.Of(s)
				r.Energy += j
				if est {
					r.EnergyEstimated++
				}
				if !s.GetSmActiveUnavailable() {
					r.SMSum += s.GetSmActive()
					r.ActiveSamples++
					r.ActiveNs += s.GetIntervalNs()
				}
				if s.GetAttached() {
					r.AttachedSum++
					if r.FirstAttached == 0 {
						r.FirstAttached = ts
					}
				}
				r.SwitchSum += s.GetVgpu().GetSwitchNs()
				r.RunSum += s.GetVgpu().GetRunNs()
				for _, w := range s.GetVgpu().GetWaitsNs() {
					addWait(r, w, 1)
				}
			}
		}
	}
	// Minutes from the seconds, the same way.
	wantM := map[key]*rollupRow{}
	for k, r := range wantS {
		mk := key{k.node, k.id, k.time - k.time%60}
		m := wantM[mk]
		if m == nil {
			m = &rollupRow{Time: time.Unix(int64(mk.time), 0).UTC(), Node: k.node, InstanceID: k.id, Kind: r.Kind}
			wantM[mk] = m
		}
		m.Samples += r.Samples
		m.CoveredNs += r.CoveredNs
		if m.FirstNs == 0 || r.FirstNs < m.FirstNs {
			m.FirstNs = r.FirstNs
		}
		m.LastNs = max(m.LastNs, r.LastNs)
		m.MemMax = max(m.MemMax, r.MemMax)
		m.Energy += r.Energy
		m.EnergyEstimated += r.EnergyEstimated
		m.SMSum += r.SMSum
		m.ActiveSamples += r.ActiveSamples
		m.ActiveNs += r.ActiveNs
		m.AttachedSum += r.AttachedSum
		m.SwitchSum += r.SwitchSum
		m.RunSum += r.RunSum
		if r.FirstAttached != 0 && (m.FirstAttached == 0 || r.FirstAttached < m.FirstAttached) {
			m.FirstAttached = r.FirstAttached
		}
		for i, w := range r.WaitNs {
			addWait(m, w, r.WaitCount[i])
		}
	}

	// store inserts samples [from, to) of all as one flush does: raw rows, then rollups.
	store := func(from, to int) {
		var cols sampleColumns
		var tr touched
		for _, x := range all[from:to] {
			cols.add(x.node, x.s)
			tr.addNode(x.node)
			tr.addSecond(uint32(x.s.GetTsNs() / 1e9))
		}
		if err := insertColumns(ctx, conn, tables.Samples, tables.SampleColumns, cols.columns()); err != nil {
			t.Fatal(err)
		}
		if err := recomputeRollups(ctx, conn, &tr); err != nil {
			t.Fatal(err)
		}
	}
	// Flushes that split seconds and minutes, with two replays overlapping them.
	cuts := []int{0, 777, 1500, 1501, 3100, 4000, 4200, 6000}
	for i := 1; i < len(cuts); i++ {
		store(cuts[i-1], cuts[i])
	}
	store(700, 2000)
	store(3000, 6000)

	for _, tc := range []struct {
		table string
		want  map[key]*rollupRow
	}{{"samples_1s", wantS}, {"samples_1m", wantM}} {
		got := readRollup(t, ctx, conn, tc.table)
		if len(got) != len(tc.want) {
			t.Fatalf("%s: %d rows, want %d", tc.table, len(got), len(tc.want))
		}
		for _, g := range got {
			w := tc.want[key{g.Node, g.InstanceID, uint64(g.Time.Unix())}]
			if w == nil {
				t.Fatalf("%s: unexpected row %+v", tc.table, g)
			}
			if diff := compareRollup(g, *w); diff != "" {
				t.Errorf("%s %s/%s %s: %s", tc.table, g.Node, g.InstanceID, g.Time.Format(time.TimeOnly), diff)
			}
		}
	}
}

// TestRollupActiveSamples checks that samples whose activity was not measured count as metered
// time (samples, covered_ns) but stay out of sm_active_sum, active_samples and active_ns, in
// samples_1s and samples_1m alike, and that rows written before those columns existed read as
// all measured.
func TestRollupActiveSamples(t *testing.T) {
	conn := localtest.Database(t, localtest.DatabaseOptions{}).Conn
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	type want struct {
		samples, coveredNs, activeSamples, activeNs uint64
		smSum                                       float64
	}
	// sec and smActive per sample; unavailable samples carry a junk sm_active on purpose.
	type in struct {
		sec         uint64
		smActive    float64
		unavailable bool
	}
	for _, tc := range []struct {
		name string
		in   []in
		// noColumn inserts the raw rows without sm_active_unavailable, as before the column existed.
		noColumn bool
		// oldSeconds writes the samples_1s rows directly without active_samples and active_ns, as
		// before those columns existed, and recomputes only samples_1m from them.
		oldSeconds bool
		want       want
	}{
		{"all measured", []in{{0, 0.5, false}, {0, 0.25, false}, {1, 1, false}}, false, false,
			want{3, 3e8, 3, 3e8, 1.75}},
		{"none measured", []in{{0, 0.7, true}, {1, 0.7, true}}, false, false,
			want{2, 2e8, 0, 0, 0}},
		{"mixed within a second", []in{{0, 0.5, false}, {0, 0.9, true}, {0, 0.25, false}}, false, false,
			want{3, 3e8, 2, 2e8, 0.75}},
		{"mixed across seconds", []in{{0, 0.5, false}, {1, 0.9, true}, {2, 0.9, true}, {59, 1, false}}, false, false,
			want{4, 4e8, 2, 2e8, 1.5}},
		{"raw rows before the column", []in{{0, 0.5, false}, {1, 0.5, false}}, true, false,
			want{2, 2e8, 2, 2e8, 1}},
		{"second rows before the columns", []in{{0, 0.5, false}, {1, 0.25, false}}, false, true,
			want{2, 2e8, 2, 2e8, 0.75}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			node := strings.ReplaceAll(tc.name, " ", "-")
			minute := (base/1e9)/60*60 + 60 // a whole minute after base
			var cols sampleColumns
			var tr touched
			tr.addNode(node)
			for i, x := range tc.in {
				ts := (minute+x.sec)*1e9 + uint64(i)*1e8 // apart by the interval: no overlap
				s := sample(pb.Kind_KIND_MIG, "gpu0/mig0", ts)
				s.SmActive, s.SmActiveUnavailable = x.smActive, x.unavailable
				cols.add(node, s)
				tr.addSecond(uint32(ts / 1e9))
			}
			switch {
			case tc.oldSeconds:
				for _, x := range tc.in {
					if err := conn.Exec(ctx, `INSERT INTO samples_1s (time, node, instance_id, kind, samples,
                        covered_ns, sm_active_sum) SELECT toDateTime(?), ?, 'gpu0/mig0', 'mig', 1, 100000000, ?`,
						uint32(minute+x.sec), node, x.smActive); err != nil {
						t.Fatal(err)
					}
				}
				if err := conn.Exec(ctx, rollupMinutesQuery, tr.nodeSet(), uint32(minute), uint32(minute+59)); err != nil {
					t.Fatal(err)
				}
			default:
				names, columns := tables.SampleColumns, cols.columns()
				if tc.noColumn {
					n := slices.Index(names, "sm_active_unavailable")
					names, columns = slices.Delete(slices.Clone(names), n, n+1), slices.Delete(columns, n, n+1)
				}
				if err := insertColumns(ctx, conn, "samples", names, columns); err != nil {
					t.Fatal(err)
				}
				if err := recomputeRollups(ctx, conn, &tr); err != nil {
					t.Fatal(err)
				}
			}
			for _, table := range []string{"samples_1s", "samples_1m"} {
				var got want
				if err := conn.QueryRow(ctx, `SELECT sum(samples), sum(covered_ns), sum(active_samples),
                    sum(active_ns), sum(sm_active_sum)
                    FROM (SELECT * FROM `+table+` WHERE node = ? ORDER BY samples DESC LIMIT 1 BY node, instance_id, time)`,
					node).Scan(&got.samples, &got.coveredNs, &got.activeSamples, &got.activeNs, &got.smSum); err != nil {
					t.Fatalf("read %s: %v", table, err)
				}
				if d := got.smSum - tc.want.smSum; d > 1e-9 || d < -1e-9 {
					t.Errorf("%s: sm_active_sum %v, want %v", table, got.smSum, tc.want.smSum)
				}
				got.smSum = tc.want.smSum
				if got != tc.want {
					t.Errorf("%s: %+v, want %+v", table, got, tc.want)
				}
			}
		})
	}
}

// addWait adds count occurrences of wait w to r's histogram, keeping wait_ns sorted as sumMap does.
func addWait(r *rollupRow, w, count uint64) {
	for i, x := range r.WaitNs {
		if x == w {
			r.WaitCount[i] += count
			return
		}
		if x > w {
			r.WaitNs = append(r.WaitNs[:i], append([]uint64{w}, r.WaitNs[i:]...)...)
			r.WaitCount = append(r.WaitCount[:i], append([]uint64{count}, r.WaitCount[i:]...)...)
			return
		}
	}
	r.WaitNs = append(r.WaitNs, w)
	r.WaitCount = append(r.WaitCount, count)
}

func compareRollup(got, want rollupRow) string {
	if len(want.WaitNs) == 0 {
		want.WaitNs, want.WaitCount = []uint64{}, []uint64{}
	}
	if d := got.SMSum - want.SMSum; d > 1e-9 || d < -1e-9 {
		return fmt.Sprintf("sm_active_sum %v, want %v", got.SMSum, want.SMSum)
	}
	got.SMSum = want.SMSum
	if math.Abs(got.Energy-want.Energy) > 1e-12*max(1, math.Abs(want.Energy)) { // summed in another order
		return fmt.Sprintf("energy_j_sum %v, want %v", got.Energy, want.Energy)
	}
	got.Energy = want.Energy
	if !reflect.DeepEqual(got, want) {
		return fmt.Sprintf("got %+v\nwant %+v", got, want)
	}
	return ""
}

// TestRollupQueriesOnCurrentClickHouse runs the rollup recomputations through chDB (current
// ClickHouse) after the migrations, with two samples in place, the second not measured; 18.16
// runs them in TestRollupsExactlyOnce and TestRollupActiveSamples.
func TestRollupQueriesOnCurrentClickHouse(t *testing.T) {
	localtest.SkipShort(t, "chDB (python)")
	bind := func(q string) string {
		for _, arg := range []string{"('node-a', 'node-b')", "1767571200", "1767571319", "1767571200", "1767571319"} {
			q = strings.Replace(q, "?", arg, 1)
		}
		return q + ";\n"
	}
	sql := "INSERT INTO samples (" + strings.Join(tables.SampleColumns, ", ") + `)
SELECT toDateTime(1767571200), 1767571200000000000, 100000000, 'node-a', 'GPU-1', 0, 'H100', 'vgpu',
    'gpu0/vgpu0', 'H100-20C', 1, 0.5, 1, 2, 300, 0, 0, 0, 3, 4, 5, [6, 6, 7], 0, 0, 1000, 30., 0
UNION ALL
SELECT toDateTime(1767571200), 1767571200100000000, 100000000, 'node-a', 'GPU-1', 0, 'H100', 'vgpu',
    'gpu0/vgpu0', 'H100-20C', 1, 0.9, 1, 2, 300, 0, 0, 0, 3, 4, 5, [], 1, 0, 0, 30., 1;
` + bind(rollupSecondsQuery) + bind(rollupMinutesQuery) + `SELECT throwIf(wait_count != [2, 1] OR samples != 2
    OR first_attached_ns != 1767571200000000000 OR active_samples != 1 OR active_ns != 100000000
    OR covered_ns != 200000000 OR abs(sm_active_sum - 0.5) > 1e-9
    OR abs(energy_j_sum - 60) > 1e-9 OR energy_estimated_samples != 1) FROM samples_1m;
`
	localtest.CheckScriptWithChDB(t, "rollup.sql", sql)
}

// TestRollupPieces checks that a rollup row holds the pieces of the samples inside its second:
// a sample spanning seconds counts in each by its part (and the flush recomputes each of them),
// overlapping samples cover their union once (covered_ns, active_ns), each instant with the
// mean sm_active of the samples covering it (sm_active_ns), and samples and the per-sample
// sums stay those of the samples taken in the row.
func TestRollupPieces(t *testing.T) {
	conn := localtest.Database(t, localtest.DatabaseOptions{}).Conn
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const node = "pieces"
	minute := (base/1e9)/60*60 + 60
	s0 := minute + 58 // the seconds s0, s0+1 (59) and s0+2 (the next minute)
	var cols sampleColumns
	var tr touched
	tr.addNode(node)
	for _, x := range []struct {
		at, interval uint64 // ns after s0
		sm           float64
	}{
		{800e6, 1500e6, 0.2}, // [0.8, 2.3): three seconds, two minutes
		{1000e6, 100e6, 1},   // [1.0, 1.1): inside the first
		{1050e6, 100e6, 1},   // [1.05, 1.15): a clock step back
	} {
		s := sample(pb.Kind_KIND_MIG, "gpu0/mig0", s0*1e9+x.at)
		s.IntervalNs, s.SmActive = x.interval, x.sm
		cols.add(node, s)
		tr.addSample(s.TsNs, s.IntervalNs)
	}
	if err := insertColumns(ctx, conn, "samples", tables.SampleColumns, cols.columns()); err != nil {
		t.Fatal(err)
	}
	if err := recomputeRollups(ctx, conn, &tr); err != nil {
		t.Fatal(err)
	}
	type row struct {
		sec, samples, covered, active uint64
		smNS, smSum                   float64
	}
	read := func(table string) []row {
		rows, err := conn.Query(ctx, `SELECT toUInt64(time), samples, covered_ns, active_ns, sm_active_ns, sm_active_sum
            FROM `+table+` FINAL WHERE node = ? ORDER BY time`, node)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.sec, &r.samples, &r.covered, &r.active, &r.smNS, &r.smSum); err != nil {
				t.Fatal(err)
			}
			out = append(out, r)
		}
		return out
	}
	// s0 + 1: [1.0, 1.05) at (0.2 + 1) / 2, [1.05, 1.1) at (0.2 + 1 + 1) / 3, [1.1, 1.15) at
	// (0.2 + 1) / 2, [1.15, 2.0) at 0.2.
	second := 0.6*50e6 + 2.2/3*50e6 + 0.6*50e6 + 0.2*850e6
	for _, tc := range []struct {
		table string
		want  []row
	}{
		{"samples_1s", []row{
			{s0, 1, 200e6, 200e6, 0.2 * 200e6, 0.2},
			{s0 + 1, 2, 1e9, 1e9, second, 2},
			{s0 + 2, 0, 300e6, 300e6, 0.2 * 300e6, 0},
		}},
		{"samples_1m", []row{
			{minute, 3, 1200e6, 1200e6, 0.2*200e6 + second, 2.2},
			{minute + 60, 0, 300e6, 300e6, 0.2 * 300e6, 0},
		}},
	} {
		got := read(tc.table)
		near := func(a, b float64) bool { return math.Abs(a-b) < 1e-3 }
		ok := len(got) == len(tc.want)
		for i := 0; ok && i < len(got); i++ {
			g, w := got[i], tc.want[i]
			ok = g.sec == w.sec && g.samples == w.samples && g.covered == w.covered && g.active == w.active &&
				near(g.smNS, w.smNS) && near(g.smSum, w.smSum)
		}
		if !ok {
			t.Errorf("%s:\n%+v\nwant\n%+v", tc.table, got, tc.want)
		}
	}
}
