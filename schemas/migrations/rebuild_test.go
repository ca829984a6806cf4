package migrations_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/schemas/migrations"
)

// TestRebuildSamples1s runs migration 0048 (samples_1s sorted by time first) on a samples_1s
// sorted the former way with rows in it, and again after it was interrupted at each point: the
// rows are all there once, the table is sorted by time, and the copy's spare tables are gone.
// Each run drops schema_migrations first, so Apply runs every migration again, as after a
// crash before the record (they must all be safe to re-run).
func TestRebuildSamples1s(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	conn := localtest.Database(t, localtest.DatabaseOptions{}).Conn
	exec := func(q string) {
		t.Helper()
		if err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	insert := func(table string, from, n int) {
		t.Helper()
		exec(`INSERT INTO ` + table + ` (time, node, instance_id, samples, covered_ns)
SELECT toDateTime(1772409600 + number), concat('node-', toString(number % 3)), 'gpu0', toUInt64(10), toUInt64(1000000000)
FROM system.numbers LIMIT ` + strconv.Itoa(from) + `, ` + strconv.Itoa(n))
	}
	reapply := func(what string) {
		t.Helper()
		exec("DROP TABLE " + migrations.Table)
		if _, err := migrations.Apply(ctx, conn); err != nil {
			t.Fatalf("%s: Apply: %v", what, err)
		}
	}
	check := func(what string, keys uint64) {
		t.Helper()
		var rows, distinct uint64
		if err := conn.QueryRow(ctx, "SELECT count(), uniqExact(node, instance_id, time) FROM samples_1s").Scan(&rows, &distinct); err != nil {
			t.Fatal(err)
		}
		if distinct != keys {
			t.Errorf("%s: samples_1s holds %d keys (%d rows), want %d", what, distinct, rows, keys)
		}
		if got := createQuery(ctx, t, conn, "samples_1s"); !strings.Contains(got, "ORDER BY (time, node, instance_id)") {
			t.Errorf("%s: samples_1s is %s, want ORDER BY (time, node, instance_id)", what, got)
		}
		for _, spare := range []string{"samples_1s_by_time", "samples_1s_by_node"} {
			if got := createQuery(ctx, t, conn, spare); got != "" {
				t.Errorf("%s: table %s is left: %s", what, spare, got)
			}
		}
	}

	// The table as migrations 0003-0041 left it, with rows.
	exec("CREATE TABLE samples_1s_former AS samples_1s ENGINE = ReplacingMergeTree(samples) PARTITION BY toYYYYMMDD(time) ORDER BY (node, instance_id, time)")
	exec("DROP TABLE samples_1s")
	exec("RENAME TABLE samples_1s_former TO samples_1s")
	if got := createQuery(ctx, t, conn, "samples_1s"); !strings.Contains(got, "ORDER BY (node, instance_id, time)") {
		t.Fatalf("the former layout: %s", got)
	}
	insert("samples_1s", 0, 1000)
	reapply("from the node-first table")
	check("from the node-first table", 1000)

	// Interrupted after the swap, before the drop: the spare is dropped and nothing is copied
	// again (the row only the spare holds stays out).
	exec("CREATE TABLE samples_1s_by_node AS samples_1s")
	insert("samples_1s_by_node", 5000, 1)
	reapply("after the swap")
	check("after the swap", 1000)

	// Interrupted during the copy: the new table holds part of the rows; the copy runs again.
	exec("CREATE TABLE samples_1s_by_time AS samples_1s")
	insert("samples_1s_by_time", 0, 10)
	insert("samples_1s", 1000, 500) // written by a collector meanwhile
	reapply("during the copy")
	check("during the copy", 1500)
}

// createQuery is SHOW CREATE TABLE of table, "" when there is no such table.
func createQuery(ctx context.Context, t *testing.T, conn driver.Conn, table string) string {
	t.Helper()
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = currentDatabase() AND name = ?", table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		return ""
	}
	var q string
	if err := conn.QueryRow(ctx, "SHOW CREATE TABLE "+table).Scan(&q); err != nil {
		t.Fatal(err)
	}
	return q
}
