package collector

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/internal/chconn"
	"github.com/slicemeter/slicemeter/schemas/migrations"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

func TestIsDayPartition(t *testing.T) {
	for p, want := range map[string]bool{"20260105": true, "2026010": false, "202601051": false, "2026-1-5": false, "": false, "tuple()": false} {
		if got := isDayPartition(p); got != want {
			t.Errorf("isDayPartition(%q) = %v, want %v", p, got, want)
		}
	}
}

// TestDropExpired stores samples and rollups on four days and expires raw samples after 2
// days and rollups after 3 (seconds) and never (minutes).
func TestDropExpired(t *testing.T) {
	conn := localtest.Database(t, localtest.DatabaseOptions{}).Conn
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	day0 := time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC) // partitions 20260105 .. 20260108
	var cols sampleColumns
	var tr touched
	for d := range 4 {
		ts := uint64(day0.AddDate(0, 0, d).UnixNano())
		cols.add("node-a", sample(pb.Kind_KIND_GPU, "gpu0", ts))
		tr.addNode("node-a")
		tr.addSecond(uint32(ts / 1e9))
	}
	if err := insertColumns(ctx, conn, tables.Samples, tables.SampleColumns, cols.columns()); err != nil {
		t.Fatal(err)
	}
	if err := recomputeRollups(ctx, conn, &tr); err != nil {
		t.Fatal(err)
	}
	// Now: 2026-01-09 06:00. Raw cutoff 01-07 06:00: 0105 and 0106 ended before it, 0107 did not.
	now := time.Date(2026, 1, 9, 6, 0, 0, 0, time.UTC)
	r := Retention{Raw: 48 * time.Hour, Rollup1s: 72 * time.Hour}
	dropped, err := DropExpired(ctx, conn, now, r)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"samples/20260105", "samples/20260106", "samples_1s/20260105"}
	if !reflect.DeepEqual(dropped, want) {
		t.Errorf("dropped %v, want %v", dropped, want)
	}
	for table, wantRows := range map[string]uint64{"samples": 2, "samples_1s": 3, "samples_1m": 4} {
		var n uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM "+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != wantRows {
			t.Errorf("%s: %d rows left, want %d", table, n, wantRows)
		}
	}
	// Idempotent: nothing more to drop.
	if again, err := DropExpired(ctx, conn, now, r); err != nil || len(again) != 0 {
		t.Errorf("second DropExpired: %v, %v", again, err)
	}
}

func TestHasTTL(t *testing.T) {
	for v, want := range map[string]bool{"18.16.1": false, "19.5.3.8": false, "19.6.2.11": true, "20.3.1": true, "26.9.2.1": true, "": false, "x.y": false} {
		if got := hasTTL(v); got != want {
			t.Errorf("hasTTL(%q) = %v, want %v", v, got, want)
		}
	}
}

// TestApplyTTL: nothing on 18.16 (no TTL there; partitions are dropped instead), and the
// statements it would run elsewhere run on current ClickHouse (chDB) after the migrations.
func TestApplyTTL(t *testing.T) {
	conn := localtest.Database(t, localtest.DatabaseOptions{}).Conn
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := Retention{Raw: 48 * time.Hour, Rollup1m: 720 * time.Hour}
	if set, err := ApplyTTL(ctx, conn, r); err != nil || set {
		t.Fatalf("ApplyTTL on 18.16: set %v, %v; want nothing set", set, err)
	}
	stmts := ttlStatements(r)
	want := []string{"ALTER TABLE samples MODIFY TTL time + toIntervalSecond(259200)", "ALTER TABLE samples_1m MODIFY TTL time + toIntervalSecond(2678400)"}
	if !reflect.DeepEqual(stmts, want) {
		t.Fatalf("statements %q, want %q", stmts, want)
	}
	script := strings.Join(stmts, ";\n") + ";\nSELECT throwIf(count() != 2) FROM system.tables WHERE database = currentDatabase() AND name IN ('samples', 'samples_1m') AND position(create_table_query, 'TTL') > 0;\n"
	localtest.CheckScriptWithChDB(t, "ttl.sql", script)
}

// TestDropExpiredCluster: on a two-shard cluster the day partitions live in samples_local on
// each shard; DropExpired finds the days through the Distributed table and drops them ON
// CLUSTER, from both shards.
func TestDropExpiredCluster(t *testing.T) {
	const name = "retention_test"
	cl := localtest.NewCluster(t, local.ClusterOptions{Name: name, Shards: 2, Profile: migrations.ClusterSettings})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const db = "collector_retention_cluster"
	if err := chconn.EnsureDatabase(ctx, cl.Nodes[0].DSN(db)); err != nil {
		t.Fatal(err)
	}
	conn, err := chconn.Open(ctx, cl.Nodes[0].DSN(db))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := migrations.ApplyCluster(ctx, conn, name); err != nil {
		t.Fatal(err)
	}
	// Four days of samples from eight nodes: sharded by node, both shards get some of each day.
	day0 := time.Date(2026, 1, 5, 12, 0, 0, 0, time.UTC)
	var cols sampleColumns
	for d := range 4 {
		for n := range 8 {
			cols.add(fmt.Sprintf("node-%d", n), sample(pb.Kind_KIND_GPU, "gpu0", uint64(day0.AddDate(0, 0, d).UnixNano())))
		}
	}
	if err := insertColumns(ctx, conn, tables.Samples, tables.SampleColumns, cols.columns()); err != nil {
		t.Fatal(err)
	}
	perShard := func() []uint64 {
		var out []uint64
		for _, n := range cl.Nodes {
			c, err := chconn.Open(ctx, n.DSN(db))
			if err != nil {
				t.Fatal(err)
			}
			var rows uint64
			if err := c.QueryRow(ctx, "SELECT count() FROM samples_local").Scan(&rows); err != nil {
				t.Fatal(err)
			}
			c.Close()
			out = append(out, rows)
		}
		return out
	}
	before := perShard()
	if before[0] == 0 || before[1] == 0 || before[0]+before[1] != 32 {
		t.Fatalf("rows per shard %v: want 32 spread over both", before)
	}
	now := time.Date(2026, 1, 9, 6, 0, 0, 0, time.UTC) // raw cutoff 01-07 06:00: 0105 and 0106 expire
	r := Retention{Raw: 48 * time.Hour, Cluster: name}
	dropped, err := DropExpired(ctx, conn, now, r)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"samples/20260105", "samples/20260106"}; !reflect.DeepEqual(dropped, want) {
		t.Errorf("dropped %v, want %v", dropped, want)
	}
	after := perShard()
	if after[0]+after[1] != 16 || after[0] == 0 || after[1] == 0 {
		t.Errorf("rows per shard after the drop %v (before %v): want the two newer days, 16 rows, on both shards", after, before)
	}
	var oldest uint64
	if err := conn.QueryRow(ctx, "SELECT toUInt64(toYYYYMMDD(min(time))) FROM samples").Scan(&oldest); err != nil || oldest != 20260107 {
		t.Errorf("oldest day left %d (%v), want 20260107", oldest, err)
	}
	if again, err := DropExpired(ctx, conn, now, r); err != nil || len(again) != 0 {
		t.Errorf("second DropExpired: %v, %v", again, err)
	}
}
