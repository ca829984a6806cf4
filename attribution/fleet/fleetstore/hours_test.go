package fleetstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/fleet/fleetstore"
	"github.com/slicemeter/slicemeter/attribution/internal/chtest"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/attribution/stored"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
)

// fleetRollupRows inserts samples_1m rows for the minutes [from, to): eight instances on two
// nodes (six MIG instances, two whole GPUs), values drawn from a hash of (seed, instance,
// minute), one minute in 13 missing; version subtracts from each row's samples (an incomplete
// version of it: fewer samples, other sums) and keep is a condition on (i, m) choosing the rows
// written.
func fleetRollupRows(ctx context.Context, t *testing.T, conn driver.Conn, from, to time.Time, seed, version int, keep string) {
	t.Helper()
	minutes := int(to.Sub(from) / time.Minute)
	q := fmt.Sprintf(`INSERT INTO samples_1m (node, gpu_uuid, gpu_index, model, kind, instance_id, profile, time,
    compute_slices, sm_count, gpu_sm_count, mem_total_bytes, gpu_mem_total_bytes, interval_ns,
    samples, covered_ns, sm_active_sum, attached_sum, vgpu_switch_ns_sum, vgpu_run_ns_sum,
    first_attached_ns, mem_used_bytes_sum, power_watts_sum, wait_ns, wait_count, first_ns, last_ns, sm_active_ns)
SELECT concat('node-', toString(i %% 2)), if(i < 6, concat('GPU-n', toString(i %% 2)), concat('GPU-w', toString(i))),
    toUInt32(if(i < 6, 0, 1)), 'A100-SXM4-40GB', if(i < 6, 'mig', 'whole'),
    if(i < 6, concat('gpu0/mig', toString(i)), 'gpu1'), if(i < 6, '1g.5gb', ''), toDateTime(%d + m * 60),
    toUInt32(if(i < 6, 1, 7)), toUInt32(if(i < 6, 14, 108)), toUInt32(108),
    toUInt64(if(i < 6, 5368709120, 42949672960)), toUInt64(42949672960), toUInt64(1000000000),
    toUInt64(n), toUInt64(n * 1000000000 - h %% 1000), 0., toUInt64(h %% (n + 1)), toUInt64(0), toUInt64(0),
    toUInt64(0), n * toFloat64(h %% 5000000000), n * (100. + h %% 200), emptyArrayUInt64(), emptyArrayUInt64(),
    toUInt64((%d + m * 60 + h %% 3) * 1000000000), toUInt64((%d + m * 60 + 57 + h %% 3) * 1000000000), (h %% 1000) / 1000. * n * 1e9
FROM (
    SELECT intDiv(number, %d) AS i, number %% %d AS m, cityHash64(%d, i, m) AS h, toInt64(50 + h %% 11) - (%d) AS n
    FROM system.numbers LIMIT %d)
WHERE cityHash64(i, m) %% 13 != 0 AND NOT (i = 6 AND m BETWEEN 80 AND 150) AND (%s)`,
		from.Unix(), from.Unix(), from.Unix(), minutes, minutes, seed, version, 8*minutes, keep)
	if err := conn.Exec(ctx, q); err != nil {
		t.Fatalf("insert samples_1m rows: %v", err)
	}
}

// fleetReadings are what the fleet reads of samples_1m for a window, as JSON values.
func fleetReadings(ctx context.Context, t *testing.T, conn driver.Conn, from, to time.Time) any {
	t.Helper()
	instances, err := fleetstore.FleetInstances(ctx, conn, from, to)
	if err != nil {
		t.Fatal(err)
	}
	window := billing.Interval{Start: from.UnixNano(), End: to.UnixNano()}
	capacity := map[string][]billing.Interval{}
	for _, read := range []func() (*store.Presence, error){
		func() (*store.Presence, error) { return fleetstore.FleetPresence(ctx, conn, window, time.Hour) },
		func() (*store.Presence, error) {
			return store.ReadPresence(ctx, conn, store.MinuteRollup, window, time.Hour)
		},
	} {
		p, err := read()
		if err != nil {
			t.Fatal(err)
		}
		c, err := p.Capacity(window)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][]billing.Interval{}
		for g, ivs := range c {
			got[g.Node+"/"+g.UUID+"/"+g.Model] = ivs
		}
		if len(capacity) == 0 {
			capacity = got
		} else if !reflect.DeepEqual(got, capacity) {
			t.Errorf("[%s, %s): the fleet's presence %v ≠ ReadPresence's %v", from.Format(time.Kitchen), to.Format(time.Kitchen), capacity, got)
		}
	}
	raw, err := json.Marshal(map[string]any{"instances": instances, "capacity": capacity})
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFleetHoursAreTheMinutes: samples_1m rows over 3 h 25 min (incomplete versions, rows
// written twice, minutes missing) and stored minutes are written to two databases alike; one
// is rolled up by hour (fleetstore.RollupFleetHours) at some steps, the other never. The fleet's
// instances and capacity (FleetPresence, also against ReadPresence) are the same
// (to 1e-9; capacity to the ns) from both, for windows with and without
// partial hours: after a roll-up, while an hour is stale (late samples_1m rows, recomputed
// minutes, a merge joining its parts with later ones), and after the roll-up that follows. A row only the roll-up holds shows
// that fresh hours are read from it, and stale ones not.
func TestFleetHoursAreTheMinutes(t *testing.T) {
	if testing.Short() {
		t.Skip("writes samples_1m rows and stored minutes into ClickHouse")
	}
	ctx := context.Background()
	db := func(suffix string) driver.Conn {
		return localtest.Database(t, localtest.DatabaseOptions{Name: localtest.DatabaseName(t) + suffix}).Conn
	}
	plain, rolled := db("_plain"), db("_rolled")
	both := []driver.Conn{plain, rolled}
	start := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	end := start.Add(3*time.Hour + 25*time.Minute)
	for _, conn := range both {
		fleetRollupRows(ctx, t, conn, start, end, 1, 3, "h % 3 = 0") // incomplete versions
		fleetRollupRows(ctx, t, conn, start, end, 1, 0, "1")
		fleetRollupRows(ctx, t, conn, start, end, 1, 0, "m % 7 = 0") // written again
	}
	r := rand.New(rand.NewPCG(5, 1))
	pass := start.Add(5 * time.Hour)
	write := func(minutes []stored.Minute) {
		t.Helper()
		pass = pass.Add(time.Second)
		for _, conn := range both {
			if err := stored.WriteMinutes(ctx, conn, minutes, pass); err != nil {
				t.Fatal(err)
			}
		}
	}
	var all []stored.Minute
	for m := start; m.Before(end); m = m.Add(time.Minute) {
		all = append(all, chtest.RandomMinute(r, m, start.Add(-time.Hour), 6))
	}
	write(all)
	check := func(step string) {
		t.Helper()
		for _, w := range [][2]time.Time{
			{start, end}, {start, start.Add(3 * time.Hour)}, {start.Add(7 * time.Minute), end.Add(-3 * time.Minute)},
			{start.Add(time.Hour), start.Add(2 * time.Hour)}, {start.Add(59 * time.Minute), start.Add(3*time.Hour + time.Minute)},
		} {
			want, got := fleetReadings(ctx, t, plain, w[0], w[1]), fleetReadings(ctx, t, rolled, w[0], w[1])
			if d := chtest.Differences("", want, got); len(d) > 0 {
				t.Errorf("%s, [%s, %s): rolled up ≠ minutes: %v", step, w[0].Format(time.Kitchen), w[1].Format(time.Kitchen), d[:min(len(d), 8)])
			}
		}
	}
	rollup := func(from, to time.Time) {
		t.Helper()
		if err := fleetstore.RollupFleetHours(ctx, rolled, from, to); err != nil {
			t.Fatal(err)
		}
	}
	check("no roll-up")
	rollup(start, end)
	check("rolled up")

	// Late samples of the second hour (complete versions with more samples), minutes of the
	// third recomputed: both hours are stale until rolled up again.
	for _, conn := range both {
		fleetRollupRows(ctx, t, conn, start.Add(time.Hour), start.Add(2*time.Hour), 2, -4, "m % 5 = 1")
	}
	var again []stored.Minute
	for _, m := range all[120:180] {
		n := chtest.RandomMinute(r, m.Start, start.Add(-time.Hour), 6)
		n.Lines = n.Lines[1:]
		again = append(again, n)
	}
	write(again)
	check("late samples and recomputed minutes, stale")
	// The pass that stored them rolls up their hour, and the changed hour before.
	rollup(again[0].Start, again[len(again)-1].Start.Add(time.Minute))
	check("rolled up again")
	// A merge of every part of the day: the hours before the late rows' read as stale (their
	// parts now hold later blocks), the figures are the same; a roll-up makes them fresh again.
	for _, conn := range both {
		if err := conn.Exec(ctx, "OPTIMIZE TABLE samples_1m FINAL"); err != nil {
			t.Fatal(err)
		}
	}
	check("merged, stale")
	for range 2 { // two hours a pass
		rollup(end, end.Add(time.Minute))
	}
	check("merged, rolled up again")

	// A ghost instance only the latest roll-up of 01:00 holds: read while the hour
	// is fresh, not once a late row makes it stale.
	ghosts := []string{
		`INSERT INTO fleet_hours (hour, node, instance_id, last_time, model, covered_ns, rolled_ns, sample_block, sample_first, sample_last, source_ns, source_minutes)
SELECT hour, 'ghost', 'g', hour, 'A100-SXM4-40GB', 60000000000, rolled_ns, sample_block, sample_first, sample_last, source_ns, source_minutes
FROM fleet_hours WHERE hour = toDateTime(?) ORDER BY rolled_ns DESC LIMIT 1`,
	}
	h := start.Add(time.Hour)
	for _, q := range ghosts {
		if err := rolled.Exec(ctx, q, h.Unix()); err != nil {
			t.Fatal(err)
		}
	}
	seen := func() bool {
		t.Helper()
		instances, err := fleetstore.FleetInstances(ctx, rolled, start, end)
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(instances, func(x fleetstore.FleetInstance) bool { return x.Node == "ghost" })
	}
	if !seen() {
		t.Errorf("fresh hour 01:00: ghost instance not read; want it from the roll-up")
	}
	write(all[70:71]) // a recomputed minute: the instances' roll-up stays fresh
	if !seen() {
		t.Errorf("hour 01:00 with a recomputed minute: ghost instance not read; want it from the roll-up")
	}
	fleetRollupRows(ctx, t, rolled, h, h.Add(time.Hour), 3, -6, "i = 2") // late samples
	if seen() {
		t.Errorf("hour 01:00 with a late row: ghost instance read; want it not")
	}
}

// TestFleetHoursQueriesCurrentDialect runs every query of the fleet's hourly roll-up and of its
// readers, as sent, values bound, through chDB (current ClickHouse) after the migrations.
func TestFleetHoursQueriesCurrentDialect(t *testing.T) {
	ctx := context.Background()
	recorder := &chtest.QueryRecorder{}
	conn := chtest.NewDatabase(t, slog.New(recorder))
	start := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	fleetRollupRows(ctx, t, conn, start, start.Add(65*time.Minute), 1, 0, "1")
	chtest.WriteRandomMinutes(ctx, t, conn, 6, start, 65)
	before := len(recorder.All())
	if err := fleetstore.RollupFleetHours(ctx, conn, start, start.Add(65*time.Minute)); err != nil {
		t.Fatal(err)
	}
	instances, err := fleetstore.FleetInstances(ctx, conn, start, start.Add(65*time.Minute))
	if err != nil || len(instances) != 8 {
		t.Fatalf("instances %+v, %v: want 8", instances, err)
	}
	queries := recorder.QueriesSince(before)
	if len(queries) < 8 {
		t.Fatalf("recorded %d queries, want the roll-up's and the readers': %q", len(queries), queries)
	}
	localtest.CheckQueriesWithChDB(t, "fleethours.sql", queries)
}
