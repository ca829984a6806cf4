package store_test

import (
	"context"
	"reflect"
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
	conn := localtest.Database(t).Conn
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
		billing.Interval{Start: (day - 86400) * int64(time.Second), End: (day + 86400) * int64(time.Second)})
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
