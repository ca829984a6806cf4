package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/e2e/apptest"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// TestAttributionReplicas: the attribution service run as one replica, then as three sharing
// the nodes through the shard group on a real Kafka broker, one of them SIGKILLed in the
// middle of its passes so that the survivors take its nodes over, then as two: every run
// stores the same minutes (every column but computed_ns, of each minute and node's latest
// pass) and the same report from them.
func TestAttributionReplicas(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	brokers := localtest.Kafka(t).Brokers()
	db := localtest.Database(t, localtest.DatabaseOptions{Unmigrated: true})
	const file = "testdata/replicas.yaml"
	start := time.Now().UTC().Truncate(time.Minute).Add(-61 * time.Minute)
	end := start.Add(time.Hour)
	apptest.Demo(t, ctx, "--no-attribution.store-minutes", "--scenario", file, "--fast", "--sim.start", start.Format(time.RFC3339), "--report", os.DevNull,
		"--clickhouse.dsn", db.DSN, "--web.listen-address", "127.0.0.1:0")

	var columns []string
	rows, err := db.Conn.Query(ctx, "SELECT name FROM system.columns WHERE database = currentDatabase() AND table = ? AND name != 'computed_ns' ORDER BY name", tables.AttributionMinutes)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		columns = append(columns, "toString("+c+")")
	}
	rows.Close()
	// Each stored row of the window's latest passes as one line; DISTINCT: a batch sent twice.
	snapshotQuery := "SELECT DISTINCT concat(" + strings.Join(columns, ", '\\t', ") + ") AS line FROM " + tables.AttributionMinutes +
		" WHERE " + tables.LatestPass(tables.MinuteWindow) + " ORDER BY line"
	snapshot := func() []string {
		t.Helper()
		rows, err := db.Conn.Query(ctx, snapshotQuery, start.Unix(), end.Unix(), start.Unix(), end.Unix())
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var l string
			if err := rows.Scan(&l); err != nil {
				t.Fatal(err)
			}
			out = append(out, l)
		}
		return out
	}
	report := func() string {
		t.Helper()
		r := apptest.Run(t, ctx, "report", "--clickhouse.dsn", db.DSN, "--scenario", file, "--from-minutes", "--from", start.Format(time.RFC3339), "--to", end.Format(time.RFC3339))
		if r.Code != 0 {
			t.Fatalf("report --from-minutes exited %d:\n%s", r.Code, r.Stderr)
		}
		return r.Stdout
	}
	args := []string{"--api.insecure-no-auth", "--clickhouse.dsn", db.DSN, "--scenario", file,
		"--attribution.interval", "1s", "--attribution.delay", "0s", "--attribution.backfill", "2h", "--attribution.max-minutes", "30"}
	truncate := func() {
		t.Helper()
		for _, table := range []string{tables.AttributionMinutes, "attribution_hours", "attribution_hour_hosts"} {
			if err := db.Conn.Exec(ctx, "TRUNCATE TABLE "+table); err != nil {
				t.Fatalf("truncate %s: %v", table, err)
			}
		}
	}

	// One replica: the reference, once all 60 minutes are stored and a pass more has run.
	one := apptest.StartAttribution(t, ctx, args...)
	for deadline := time.Now().Add(4 * time.Minute); ; time.Sleep(time.Second) {
		var minutes uint64
		if err := db.Conn.QueryRow(ctx, "SELECT uniqExact(minute) FROM "+tables.AttributionMinutes+" WHERE minute >= toDateTime(?) AND minute < toDateTime(?)",
			start.Unix(), end.Unix()).Scan(&minutes); err != nil {
			t.Fatal(err)
		}
		if minutes >= 60 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("one replica stored %d of 60 minutes\n%s", minutes, one.LogTail(20))
		}
	}
	// A pass more: the one under way may have begun before the last minute was stored.
	passes, _ := one.Metric("slicemeter_attribution_pass_duration_seconds_count")
	one.WaitMetric(t, time.Minute, "slicemeter_attribution_pass_duration_seconds_count", passes+2)
	if err := one.Stop(); err != nil {
		t.Fatalf("stop the replica: %v\n%s", err, one.LogTail(20))
	}
	want, wantReport := snapshot(), report()
	nodes := map[string]bool{}
	for _, l := range want {
		for _, f := range strings.Split(l, "\t") {
			if strings.HasPrefix(f, "node-") {
				nodes[f] = true
			}
		}
	}
	if len(want) < 60*7 || len(nodes) != 6 {
		t.Fatalf("one replica stored %d rows over %d nodes (%v), want every minute of 6 nodes", len(want), len(nodes), nodes)
	}

	for _, run := range []struct {
		replicas int
		kill     bool
	}{{3, true}, {2, false}} {
		name := fmt.Sprintf("%d replicas", run.replicas)
		if run.kill {
			name += ", one killed"
		}
		t.Run(name, func(t *testing.T) {
			truncate()
			group := fmt.Sprintf("e2e-replicas-%d-%d", run.replicas, time.Now().UnixNano())
			shardArgs := append([]string{"--attribution.shard.brokers", brokers, "--attribution.shard.group", group,
				"--attribution.shard.topic", "slicemeter.attribution.shards." + group, "--attribution.shard.partitions", "12",
				"--attribution.shard.session-timeout", "6s"}, args...)
			var replicas []*apptest.Process
			for range run.replicas {
				replicas = append(replicas, apptest.StartAttribution(t, ctx, shardArgs...))
			}
			// Every partition owned once the group settles (a replica that joins later moves them).
			for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
				owned, each := 0, true
				for _, r := range replicas {
					n := shardPartitions(t, ctx, r)
					owned += n
					each = each && n > 0
				}
				if owned == 12 && each {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the replicas own %d of 12 partitions (each some: %v)", owned, each)
				}
			}
			if run.kill {
				// Killed while its passes are under way: some minutes stored, not all.
				for deadline := time.Now().Add(2 * time.Minute); len(snapshot()) == 0; time.Sleep(200 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("no minute stored\n%s", replicas[0].LogTail(20))
					}
				}
				victim := replicas[len(replicas)-1]
				victim.Kill()
				replicas = replicas[:len(replicas)-1]
				t.Logf("killed replica %d with %d rows stored", victim.Pid(), len(snapshot()))
			}
			var got []string
			for deadline := time.Now().Add(4 * time.Minute); ; time.Sleep(time.Second) {
				if got = snapshot(); slices.Equal(got, want) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("stored minutes differ from one replica's: %s\n%s", firstDifference(got, want), replicas[0].LogTail(20))
				}
			}
			if r := report(); r != wantReport {
				t.Errorf("report from the minutes:\n%s\nwant one replica's:\n%s", r, wantReport)
			}
			for _, r := range replicas {
				if err := r.Stop(); err != nil {
					t.Errorf("stop a replica: %v\n%s", err, r.LogTail(20))
				}
			}
		})
	}
}

var shardPartitionsMetric = regexp.MustCompile(`(?m)^slicemeter_attribution_shard_partitions (\d+)`)

// shardPartitions is how many shard partitions the replica says it owns (its /metrics).
func shardPartitions(t *testing.T, ctx context.Context, p *apptest.Process) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", p.URL("/metrics"), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := shardPartitionsMetric.FindSubmatch(b)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// firstDifference names the first line where got and want differ.
func firstDifference(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("line %d of %d/%d:\n got %s\nwant %s", i, len(got), len(want), got[i], want[i])
		}
	}
	return fmt.Sprintf("%d lines, want %d", len(got), len(want))
}
