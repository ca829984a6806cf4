package tables_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// The ClickHouse test shares the binary's server (localtest.Database); TestMain stops it.
func TestMain(m *testing.M) { localtest.Main(m) }

// TestColumnsAreTheMigratedTables compares every column list with DESCRIBE TABLE on a
// ClickHouse 18.16 server after all migrations, and checks no migrated table is missing.
func TestColumnsAreTheMigratedTables(t *testing.T) {
	conn := localtest.Database(t, localtest.DatabaseOptions{}).Conn
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var migrated []string
	rows, err := conn.Query(ctx, "SELECT name FROM system.tables WHERE database = currentDatabase() ORDER BY name")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		migrated = append(migrated, name)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	contract := tables.Columns()
	for _, name := range migrated {
		if _, ok := contract[name]; !ok {
			t.Errorf("the migrations create table %s, which schemas/tables does not describe", name)
		}
	}
	for table, want := range contract {
		if !slices.Contains(migrated, table) {
			t.Errorf("table %s: not created by the migrations", table)
			continue
		}
		rows, err := conn.Query(ctx, "DESCRIBE TABLE "+table)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for rows.Next() {
			// DESCRIBE's columns differ between versions; the name is the first on all.
			cols := rows.Columns()
			dst := make([]any, len(cols))
			var name string
			dst[0] = &name
			for i := 1; i < len(dst); i++ {
				dst[i] = new(string)
			}
			if err := rows.Scan(dst...); err != nil {
				t.Fatal(err)
			}
			got = append(got, name)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		if !slices.Equal(got, want) {
			t.Errorf("table %s:\n DESCRIBE %s\n contract %s", table, strings.Join(got, ", "), strings.Join(want, ", "))
		}
	}
}

func TestSQLFragments(t *testing.T) {
	for _, tc := range []struct{ name, got, want string }{
		{"insert", tables.Insert(tables.Samples1s, []string{"time", "node"}), "INSERT INTO samples_1s (time, node)"},
		{"latest pass", tables.LatestPass("$__timeFilter(minute)"), `$__timeFilter(minute)
    AND (minute, node, computed_ns) IN (
        SELECT minute, node, max(computed_ns) FROM attribution_minutes
        WHERE $__timeFilter(minute)
        GROUP BY minute, node)`},
		{"efficiency over measured time", tables.Efficiency, "sum(efficiency_ns) / greatest(sum(active_ns), 1)"},
		{"SM activity over measured samples", tables.SMActivity, "sum(sm_active_sum) / greatest(sum(active_samples), 1)"},
		{"final", tables.Final(tables.Samples1s), "samples_1s FINAL"},
		{"latest allocations unfiltered", tables.LatestAllocations(""), strings.TrimSuffix(tables.LatestAllocations("x"), "\n    WHERE x\n    GROUP BY allocation_id") + "\n    GROUP BY allocation_id"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, tc.got, tc.want)
		}
	}
}

// TestMinuteSumsAreTheTablesColumns: the stored-minute sums aggregate every column of
// attribution_minutes but its keys and pass, and every column of attribution_hours but its
// keys and what the roll-up was made from, once each, so that a column added to the tables
// and not to the sums (or the other way round) fails here, not in a report.
func TestMinuteSumsAreTheTablesColumns(t *testing.T) {
	sums := tables.MinuteSumColumns()
	for _, tc := range []struct {
		table   string
		columns []string
		keys    []string
	}{
		{tables.AttributionMinutes, tables.AttributionMinuteColumns, []string{"minute", "tenant", "allocation_id", "computed_ns"}},
		{tables.AttributionHours, tables.AttributionHourColumns, []string{"hour", "tenant", "allocation_id", "minutes", "source_ns", "source_minutes"}},
	} {
		want := slices.DeleteFunc(slices.Clone(tc.columns), func(c string) bool { return slices.Contains(tc.keys, c) })
		slices.Sort(want)
		got := slices.Sorted(slices.Values(sums))
		if !slices.Equal(got, want) {
			t.Errorf("%s: the minute sums aggregate %v, its columns but keys are %v", tc.table, got, want)
		}
		for _, c := range want {
			if sum, ok := tables.MinuteSum(c); !ok || !strings.Contains(sum, c) {
				t.Errorf("%s: column %s summed as %q", tc.table, c, sum)
			}
		}
	}
	if list := tables.MinuteSums("count()"); !strings.Contains(list, "sumMap(wait_ns, wait_count), 2), count(), sum(overhead_ns)") {
		t.Errorf("MinuteSums(count()): the minutes are not after the waits, where the readers scan them: %s", list)
	}
}
