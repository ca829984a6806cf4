package migrations_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/shopspring/decimal"

	"github.com/slicemeter/slicemeter/deploy/local"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/internal/chconn"
	"github.com/slicemeter/slicemeter/schemas/migrations"
)

func TestClusterStatements(t *testing.T) {
	stmt := `CREATE TABLE IF NOT EXISTS t (
    s String, -- a comment with ) and '
    a Array(UInt64)
) ENGINE = ReplacingMergeTree(v)
PARTITION BY toYYYYMMDD(time)
ORDER BY (s, v)`
	keys := map[string]string{}
	got, err := migrations.ClusterStatements(stmt, "db", "two", keys)
	if err != nil {
		t.Fatal(err)
	}
	cols := "(\n    s String, -- a comment with ) and '\n    a Array(UInt64)\n)"
	want := []string{
		"CREATE TABLE IF NOT EXISTS db.t_local ON CLUSTER two " + cols +
			" ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/db.t_local', '{replica}', v)\nPARTITION BY toYYYYMMDD(time)\nORDER BY (s, v)",
		"CREATE TABLE IF NOT EXISTS db.t ON CLUSTER two " + cols +
			" ENGINE = Distributed('two', 'db', 't_local', cityHash64(s))",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n--\n"), strings.Join(want, "\n--\n"))
	}
	for _, bad := range []struct{ stmt, db, cluster string }{
		{stmt, "db", "1bad"},
		{stmt, "db", "a-b"},
		{stmt, "db", ""},
		{stmt, "d b", "two"},
		{"ALTER TABLE t DROP COLUMN x", "db", "two"},
		{"ALTER TABLE u ADD COLUMN x UInt8", "db", "two"}, // no CREATE TABLE u before
		{"ALTER TABLE t RENAME COLUMN x TO y", "db", "two"},
		{"ALTER TABLE u MODIFY COLUMN x UInt16", "db", "two"}, // no CREATE TABLE u before
		{"CREATE TABLE t (x UInt8) ENGINE = Memory", "db", "two"},
		{"CREATE TABLE t (x UInt8) ENGINE = ReplicatedMergeTree('/p', 'r') ORDER BY x", "db", "two"},
		{"CREATE TABLE t (x UInt8 ENGINE = MergeTree() ORDER BY x", "db", "two"},
		{"CREATE TABLE t (x UInt8) ENGINE = MergeTree()", "db", "two"},
	} {
		if _, err := migrations.ClusterStatements(bad.stmt, bad.db, bad.cluster, map[string]string{"t": "s"}); err == nil {
			t.Errorf("ClusterStatements(%q, %q, %q) accepted", bad.stmt, bad.db, bad.cluster)
		}
	}
	got, err = migrations.ClusterStatements("ALTER TABLE t ADD COLUMN x UInt64 DEFAULT y\n", "db", "two", keys)
	if err != nil {
		t.Fatal(err)
	}
	want = []string{
		"ALTER TABLE db.t_local ON CLUSTER two ADD COLUMN x UInt64 DEFAULT y",
		"DROP TABLE IF EXISTS db.t ON CLUSTER two",
		"CREATE TABLE IF NOT EXISTS db.t ON CLUSTER two AS db.t_local ENGINE = Distributed('two', 'db', 't_local', cityHash64(s))",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ALTER: got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	got, err = migrations.ClusterStatements("ALTER TABLE t MODIFY COLUMN x Decimal(38, 12)", "db", "two", keys)
	if err != nil {
		t.Fatal(err)
	}
	want = []string{
		"ALTER TABLE db.t_local ON CLUSTER two MODIFY COLUMN x Decimal(38, 12)",
		"DROP TABLE IF EXISTS db.t ON CLUSTER two",
		"CREATE TABLE IF NOT EXISTS db.t ON CLUSTER two AS db.t_local ENGINE = Distributed('two', 'db', 't_local', cityHash64(s))",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("MODIFY: got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A rebuild (migration 0048's form): the copy sharded as the table it copies, the swap of
	// the local tables ON CLUSTER with the Distributed ones made again over them.
	rebuild := []struct {
		stmt string
		want []string
	}{
		{"CREATE TABLE IF NOT EXISTS t_new AS t\nENGINE = ReplacingMergeTree(v)\nORDER BY (v, s)", []string{
			"CREATE TABLE IF NOT EXISTS db.t_new_local ON CLUSTER two AS db.t_local ENGINE = " +
				"ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/db.t_new_local', '{replica}', v)\nORDER BY (v, s)",
			"CREATE TABLE IF NOT EXISTS db.t_new ON CLUSTER two AS db.t_new_local ENGINE = Distributed('two', 'db', 't_new_local', cityHash64(s))",
		}},
		{"INSERT INTO t_new (s, v) SELECT s, v FROM t", []string{"INSERT INTO t_new (s, v) SELECT s, v FROM t"}},
		{"RENAME TABLE t TO t_old, t_new TO t", []string{
			"RENAME TABLE db.t_local TO db.t_old_local, db.t_new_local TO db.t_local ON CLUSTER two",
			"DROP TABLE IF EXISTS db.t ON CLUSTER two",
			"DROP TABLE IF EXISTS db.t_new ON CLUSTER two",
			"CREATE TABLE IF NOT EXISTS db.t_old ON CLUSTER two AS db.t_old_local ENGINE = Distributed('two', 'db', 't_old_local', cityHash64(s))",
			"CREATE TABLE IF NOT EXISTS db.t ON CLUSTER two AS db.t_local ENGINE = Distributed('two', 'db', 't_local', cityHash64(s))",
		}},
		{"DROP TABLE IF EXISTS t_old", []string{"DROP TABLE IF EXISTS db.t_old ON CLUSTER two", "DROP TABLE IF EXISTS db.t_old_local ON CLUSTER two"}},
	}
	for _, r := range rebuild {
		got, err := migrations.ClusterStatements(r.stmt, "db", "two", keys)
		if err != nil {
			t.Fatalf("%s: %v", r.stmt, err)
		}
		if !reflect.DeepEqual(got, r.want) {
			t.Errorf("%s: got\n%s\nwant\n%s", r.stmt, strings.Join(got, "\n"), strings.Join(r.want, "\n"))
		}
	}
	if _, ok := keys["t_old"]; ok || keys["t"] != "s" {
		t.Errorf("sharding keys after the rebuild: %v, want t by s and no t_old", keys)
	}
	for _, bad := range []string{"CREATE TABLE IF NOT EXISTS x AS unknown ENGINE = MergeTree() ORDER BY a", "RENAME TABLE unknown TO x", "RENAME TABLE db.t TO x"} {
		if _, err := migrations.ClusterStatements(bad, "db", "two", keys); err == nil {
			t.Errorf("ClusterStatements(%q) accepted", bad)
		}
	}
	// Every shipped migration has a cluster form.
	if _, err := migrations.ClusterMigrations("slicemeter", "two"); err != nil {
		t.Fatal(err)
	}
}

// TestClusterSQLParsesOnCurrentClickHouse has chDB (current ClickHouse) parse every cluster
// statement with formatQuery. chDB has no cluster and no ZooKeeper, so it cannot run them;
// the single-node SQL they derive from runs there in TestCurrentClickHouseDialect.
func TestClusterSQLParsesOnCurrentClickHouse(t *testing.T) {
	all, err := migrations.ClusterMigrations("slicemeter", "slicemeter_cluster")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, m := range all {
		for _, stmt := range m.Statements {
			q := strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(stmt)
			// One line per statement: chdb_check.py ends a statement at a line ending in ';'.
			fmt.Fprintf(&b, "-- %s\nSELECT formatQuery('%s');\n", m.Name, strings.ReplaceAll(q, "\n", `\n`))
		}
	}
	file := filepath.Join(t.TempDir(), "cluster.sql")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	localtest.CheckWithChDB(t, file)
}

// TestApplyCluster runs the cluster migrations on two ClickHouse 18.16 servers, one shard each,
// sharing one ZooKeeper: the tables appear on both nodes, rows inserted through a Distributed
// table on one node are spread over both shards and read back in full from either node, and
// attribution's IN-subquery form works on the Distributed table with ClusterSettings.
func TestApplyCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ZooKeeper and two ClickHouse servers")
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const cluster = "slicemeter_test"
	_, nodes := startCluster(t, cluster)
	t.Logf("cluster up in %s", time.Since(began).Round(time.Millisecond))

	const db = "slicemeter_cluster"
	dsn := func(ch *local.ClickHouse) string { return ch.DSN(db) }
	if err := chconn.EnsureDatabase(ctx, dsn(nodes[0])); err != nil { // on node 0 only: ApplyCluster creates it on the others
		t.Fatal(err)
	}
	conn0 := open(ctx, t, dsn(nodes[0]))
	if err := migrations.CheckClusterSettings(ctx, conn0); err != nil {
		t.Fatal(err)
	}

	all, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range all {
		names = append(names, m.Name)
	}
	step := time.Now()
	applied, err := migrations.ApplyCluster(ctx, conn0, cluster)
	if err != nil {
		t.Fatalf("ApplyCluster: %v", err)
	}
	t.Logf("cluster migrations applied in %s", time.Since(step).Round(time.Millisecond))
	if !reflect.DeepEqual(applied, names) {
		t.Errorf("first ApplyCluster applied %v, want %v", applied, names)
	}
	if applied, err = migrations.ApplyCluster(ctx, conn0, cluster); err != nil || len(applied) != 0 {
		t.Errorf("second ApplyCluster applied %v (err %v), want nothing", applied, err)
	}
	if _, err := migrations.ApplyCluster(ctx, conn0, "no_such_cluster"); err == nil || !strings.Contains(err.Error(), "not defined") {
		t.Errorf("ApplyCluster on an unknown cluster: err %v", err)
	}

	// Both nodes have every table: Distributed under the schema's names, Replicated behind it,
	// with a writable replica in ZooKeeper.
	conn1 := open(ctx, t, dsn(nodes[1]))
	for i, conn := range []driver.Conn{conn0, conn1} {
		for _, table := range []string{"samples", "allocations", "samples_1s", "samples_1m", "attribution_minutes"} {
			for name, want := range map[string]string{table: "Distributed", table + migrations.LocalSuffix: "ReplicatedReplacingMergeTree"} {
				var engine string
				if err := conn.QueryRow(ctx, "SELECT any(engine) FROM system.tables WHERE database = ? AND name = ?", db, name).Scan(&engine); err != nil {
					t.Fatal(err)
				}
				if engine != want {
					t.Errorf("node %d: table %s has engine %q, want %s", i, name, engine, want)
				}
			}
		}
		var writable uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM system.replicas WHERE database = ? AND is_readonly = 0", db).Scan(&writable); err != nil {
			t.Fatal(err)
		}
		for _, table := range []string{"billing_periods", "billing_period_lines", "allocation_audit", "price_books"} {
			var engine string
			if err := conn.QueryRow(ctx, "SELECT any(engine) FROM system.tables WHERE database = ? AND name = ?", db, table+migrations.LocalSuffix).Scan(&engine); err != nil {
				t.Fatal(err)
			}
			if engine != "ReplicatedMergeTree" {
				t.Errorf("node %d: table %s%s has engine %q, want ReplicatedMergeTree", i, table, migrations.LocalSuffix, engine)
			}
		}
		// The five tables above, the two of the billing periods, the audit trail, the two
		// hourly roll-ups of the stored minutes, the two of the fleet's reads (0059 dropped a
		// third, fleet_hour_tenants) and the price books the attribution service started with
		// and the recomputations it owes.
		if writable != 14 {
			t.Errorf("node %d: %d writable replicas in %s, want 14", i, writable, db)
		}
	}

	// Insert through the Distributed table on node 0: 10 nodes × 3 samples.
	step = time.Now()
	batch, err := conn0.PrepareBatch(ctx, "INSERT INTO samples (time, ts_ns, interval_ns, node, instance_id, sm_active)")
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	var wantSum float64
	for n := range 10 {
		for s := range 3 {
			ts := base.Add(time.Duration(s) * 100 * time.Millisecond)
			sm := float64(n*3+s) / 100
			wantSum += sm
			if err := batch.Append(ts.Truncate(time.Second), uint64(ts.UnixNano()), uint64(100*time.Millisecond), fmt.Sprintf("node-%d", n), "gpu0", sm); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatalf("insert into the Distributed samples: %v", err)
	}
	var perShard []uint64
	for i, conn := range []driver.Conn{conn0, conn1} {
		var (
			rows uint64
			sum  float64
		)
		if err := conn.QueryRow(ctx, "SELECT count(), sum(sm_active) FROM samples").Scan(&rows, &sum); err != nil {
			t.Fatal(err)
		}
		if rows != 30 || fmt.Sprintf("%.6f", sum) != fmt.Sprintf("%.6f", wantSum) {
			t.Errorf("node %d reads %d samples, Σ sm_active %.6f; want 30, %.6f", i, rows, sum, wantSum)
		}
		var local uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM samples"+migrations.LocalSuffix).Scan(&local); err != nil {
			t.Fatal(err)
		}
		perShard = append(perShard, local)
	}
	if perShard[0] == 0 || perShard[1] == 0 || perShard[0]+perShard[1] != 30 || perShard[0]%3 != 0 {
		t.Errorf("rows per shard %v: want both shards used, 30 in all, whole nodes per shard", perShard)
	}

	// The collector's rollup shape: INSERT ... SELECT from one Distributed table into another,
	// deduplicating with LIMIT 1 BY, right after the insert (so insert_distributed_sync matters).
	err = conn1.Exec(ctx, `INSERT INTO samples_1s (time, node, instance_id, samples, sm_active_sum)
SELECT time, node, instance_id, count(), sum(sm_active)
FROM (SELECT time, ts_ns, node, instance_id, sm_active FROM samples LIMIT 1 BY node, instance_id, ts_ns)
GROUP BY node, instance_id, time`)
	if err != nil {
		t.Fatalf("rollup through the Distributed tables: %v", err)
	}
	for i, conn := range []driver.Conn{conn0, conn1} {
		var rows, samples uint64
		if err := conn.QueryRow(ctx, "SELECT count(), sum(samples) FROM samples_1s").Scan(&rows, &samples); err != nil {
			t.Fatal(err)
		}
		if rows != 10 || samples != 30 {
			t.Errorf("node %d: samples_1s has %d rows of %d samples, want 10 of 30", i, rows, samples)
		}
	}

	// attribution's latest-pass filter: an IN subquery over the Distributed table itself.
	am, err := conn1.PrepareBatch(ctx, "INSERT INTO attribution_minutes (minute, tenant, allocation_id, cost, computed_ns)")
	if err != nil {
		t.Fatal(err)
	}
	for m := range 4 {
		minute := base.Add(time.Duration(m) * time.Minute)
		for pass := uint64(1); pass <= 2; pass++ {
			if err := am.Append(minute, "acme", "a1", decimal.NewFromInt(int64(pass)), pass); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := am.Send(); err != nil {
		t.Fatal(err)
	}
	var cost decimal.Decimal
	err = conn0.QueryRow(ctx, `SELECT sum(cost) FROM attribution_minutes
WHERE (minute, computed_ns) IN (SELECT minute, max(computed_ns) FROM attribution_minutes GROUP BY minute)`).Scan(&cost)
	if err != nil {
		t.Fatalf("IN subquery over the Distributed table: %v", err)
	}
	if !cost.Equal(decimal.NewFromInt(8)) {
		t.Errorf("Σ cost of the latest passes = %v, want 8 (4 minutes × pass 2)", cost)
	}
	// Why ClusterSettings has distributed_product_mode: ClickHouse's default refuses the query.
	_, err = nodes[0].Query(ctx, `SELECT sum(cost) FROM `+db+`.attribution_minutes
WHERE (minute, computed_ns) IN (SELECT minute, max(computed_ns) FROM `+db+`.attribution_minutes GROUP BY minute)
SETTINGS distributed_product_mode = 'deny'`)
	if err == nil || !strings.Contains(err.Error(), "Double-distributed") {
		t.Errorf("with distributed_product_mode = 'deny': err %v, want the refusal the setting avoids", err)
	}
	t.Logf("inserts and reads in %s", time.Since(step).Round(time.Millisecond))

	// A database migrated single-node is refused, not half-converted.
	if err := chconn.EnsureDatabase(ctx, nodes[0].DSN("single")); err != nil {
		t.Fatal(err)
	}
	single := open(ctx, t, nodes[0].DSN("single"))
	if _, err := migrations.Apply(ctx, single); err != nil {
		t.Fatal(err)
	}
	if err := single.Exec(ctx, "TRUNCATE TABLE "+migrations.Table); err != nil {
		t.Fatal(err)
	}
	if _, err := migrations.ApplyCluster(ctx, single, cluster); err == nil || !strings.Contains(err.Error(), "cannot convert") {
		t.Errorf("ApplyCluster over a single-node schema: err %v, want a refusal", err)
	}
	t.Logf("total %s", time.Since(began).Round(time.Millisecond))
}

func open(ctx context.Context, t *testing.T, dsn string) driver.Conn {
	t.Helper()
	conn, err := chconn.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// startCluster starts one ZooKeeper and two ClickHouse servers (all at once: each takes seconds)
// and makes the servers the two shards of cluster, one replica each, with macros {shard} and
// {replica}, distributed DDL, an interserver port (Replicated tables refuse to start without
// one), and migrations.ClusterSettings in the default user's profile.
func startCluster(t *testing.T, cluster string) (*local.ZooKeeper, []*local.ClickHouse) {
	t.Helper()
	c := localtest.NewCluster(t, local.ClusterOptions{Name: cluster, Shards: 2, Profile: migrations.ClusterSettings, Logger: testLogger(t)})
	return c.ZooKeeper, c.Nodes
}

// testLogger sends the harness's messages (ports, directories, start times) to the test log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, nil))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
