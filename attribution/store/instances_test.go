package store_test

import (
	"context"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/billing"
	"github.com/slicemeter/slicemeter/attribution/store"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
)

// TestReadInstancesEver: the latest facts of targets not sampled in a window, from samples_1s
// read over each target's latest minute in samples_1m (samples_1s is sorted by time first), are
// those of the whole history, which ReadInstancesInWindow over all time reads: a target whose
// facts changed, one whose latest rows have no sample taken in them, targets whose latest
// minutes lie hours apart (two reads), one only samples_1s still holds (older than samples_1m's
// oldest row), one sampled after the window asked about, and one never sampled.
func TestReadInstancesEver(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := localtest.Database(t, localtest.DatabaseOptions{}).Conn
	day := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC).Unix()
	// rows writes seconds [from, from+n) of a target into samples_1s with a profile and samples,
	// and, unless only1s, their minutes into samples_1m as the collector rolls them up.
	rows := func(instance string, from, n int64, profile string, samples int, only1s bool) {
		t.Helper()
		queries := []string{`INSERT INTO samples_1s (time, node, instance_id, gpu_uuid, model, kind, profile, samples, covered_ns)
SELECT toDateTime(? + number), 'node-a', ?, 'GPU-1', 'A100-SXM4-40GB', 'mig', ?, toUInt64(?), toUInt64(1000000000)
FROM system.numbers LIMIT ?`}
		if !only1s {
			queries = append(queries, `INSERT INTO samples_1m (time, node, instance_id, gpu_uuid, model, kind, profile, samples, covered_ns)
SELECT t, 'node-a', i, 'GPU-1', 'A100-SXM4-40GB', 'mig', any(p), sum(s), sum(c) FROM (
    SELECT toStartOfMinute(toDateTime(? + number)) AS t, ? AS i, ? AS p, toUInt64(?) AS s, toUInt64(1000000000) AS c
    FROM system.numbers LIMIT ?) GROUP BY t, i`)
		}
		for _, q := range queries {
			if err := conn.Exec(ctx, q, day+from, instance, profile, samples, n); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	rows("changed", 60, 60, "1g.5gb", 10, false)
	rows("changed", 1800, 30, "2g.10gb", 10, false)
	rows("unsampled-tail", 600, 60, "3g.20gb", 10, false)
	rows("unsampled-tail", 660, 60, "4g.20gb", 0, false) // covered by earlier samples only
	rows("hours-later", 5*3600, 10, "7g.40gb", 10, false)
	rows("only-1s", -3600, 10, "1g.10gb", 10, true) // before samples_1m's oldest row
	rows("later", 7*3600, 10, "2g.20gb", 10, false)

	var targets []billing.Target
	for _, i := range []string{"changed", "unsampled-tail", "hours-later", "only-1s", "later", "never"} {
		targets = append(targets, billing.Target{Node: "node-a", Instance: i})
	}
	ever, err := store.ReadInstancesEver(ctx, conn, store.SecondRollup, targets)
	if err != nil {
		t.Fatal(err)
	}
	all, err := store.ReadInstancesInWindow(ctx, conn, store.SecondRollup,
		billing.Interval{Start: (day - 86400) * int64(time.Second), End: (day + 86400) * int64(time.Second)}, store.Nodes{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Instances) != 5 {
		t.Fatalf("the whole history holds %d sampled targets, want 5: %v", len(all.Instances), all.Instances)
	}
	if !reflect.DeepEqual(ever.Instances, all.Instances) {
		t.Errorf("ReadInstancesEver:\n %v\nwant those of the whole history:\n %v", ever.Instances, all.Instances)
	}
	for instance, want := range map[string]string{"changed": "2g.10gb", "unsampled-tail": "3g.20gb", "only-1s": "1g.10gb"} {
		if got := ever.Instances[billing.Target{Node: "node-a", Instance: instance}].Profile; got != want {
			t.Errorf("%s: profile %q, want %q", instance, got, want)
		}
	}
}

// TestReadInstancesOnNodes: a replica reads the instances of its own nodes only, from every
// source: every node, some, none (no query), and nodes without a sample.
func TestReadInstancesOnNodes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := localtest.Database(t, localtest.DatabaseOptions{}).Conn
	start := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	// Each node has one instance with a sample every 100 ms of the minute, in each table.
	for _, q := range []string{
		`INSERT INTO samples (time, ts_ns, node, instance_id, gpu_uuid, model, kind, profile, interval_ns)
SELECT toDateTime(intDiv(ts, 1000000000)), ts, n, 'i', concat('GPU-', n), 'A100-SXM4-40GB', 'mig', '1g.5gb', toUInt64(100000000)
FROM (SELECT toUInt64(? * 1000000000 + (number % 600) * 100000000) AS ts, concat('node-', toString(intDiv(number, 600))) AS n
    FROM system.numbers LIMIT 1800)`,
		`INSERT INTO samples_1s (time, node, instance_id, gpu_uuid, model, kind, profile, samples, covered_ns)
SELECT toDateTime(? + number % 60), concat('node-', toString(intDiv(number, 60))) AS n, 'i', concat('GPU-', n), 'A100-SXM4-40GB', 'mig',
    '1g.5gb', toUInt64(10), toUInt64(1000000000)
FROM system.numbers LIMIT 180`,
		`INSERT INTO samples_1m (time, node, instance_id, gpu_uuid, model, kind, profile, samples, covered_ns)
SELECT toDateTime(?), concat('node-', toString(number)) AS n, 'i', concat('GPU-', n), 'A100-SXM4-40GB', 'mig',
    '1g.5gb', toUInt64(600), toUInt64(60000000000)
FROM system.numbers LIMIT 3`,
	} {
		if err := conn.Exec(ctx, q, start.Unix()); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	window := billing.Interval{Start: start.UnixNano(), End: start.Add(time.Minute).UnixNano()}
	for _, c := range []struct {
		name  string
		nodes store.Nodes
		want  []string
	}{
		{"every node", store.Nodes{}, []string{"node-0", "node-1", "node-2"}},
		{"two", store.OnlyNodes([]string{"node-2", "node-0"}), []string{"node-0", "node-2"}},
		{"one, and one never sampled", store.OnlyNodes([]string{"node-1", "node-9"}), []string{"node-1"}},
		{"none", store.OnlyNodes(nil), nil},
	} {
		for _, src := range []store.Samples{store.RawSamples, store.SecondRollup, store.MinuteRollup} {
			f, err := store.ReadInstancesInWindow(ctx, conn, src, window, c.nodes)
			if err != nil {
				t.Fatalf("%s from %s: %v", c.name, src, err)
			}
			var got []string
			for target := range maps.Keys(f.Instances) {
				got = append(got, target.Node)
			}
			if slices.Sort(got); !slices.Equal(got, c.want) {
				t.Errorf("%s from %s: the instances of %v, want %v", c.name, src, got, c.want)
			}
		}
	}
}
