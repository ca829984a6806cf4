package migrations_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/schemas/migrations"
)

func TestMain(m *testing.M) { localtest.Main(m) }

func TestAllParses(t *testing.T) {
	all, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) == 0 || len(all) != len(migrations.Files()) {
		t.Fatalf("All() = %d migrations, Files() = %v", len(all), migrations.Files())
	}
	for i, m := range all {
		if i > 0 && m.Version <= all[i-1].Version {
			t.Errorf("%s: version %d not after %d", m.Name, m.Version, all[i-1].Version)
		}
		if len(m.Statements) == 0 {
			t.Errorf("%s: no statements", m.Name)
		}
	}
}

// TestApplyTwice applies the migrations to a real ClickHouse 18.16, then again: the second run
// applies nothing and the recorded versions are those of the files.
func TestApplyTwice(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Empty: applying the migrations is what this test checks.
	conn := localtest.Database(t, localtest.DatabaseOptions{Unmigrated: true}).Conn

	all, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	want := map[uint32]string{}
	for _, m := range all {
		names = append(names, m.Name)
		want[m.Version] = m.Name
	}

	applied, err := migrations.Apply(ctx, conn)
	if err != nil {
		t.Fatalf("first Apply: %v", err)
	}
	if !reflect.DeepEqual(applied, names) {
		t.Errorf("first Apply applied %v, want %v", applied, names)
	}
	applied, err = migrations.Apply(ctx, conn)
	if err != nil {
		t.Fatalf("second Apply: %v", err)
	}
	if len(applied) != 0 {
		t.Errorf("second Apply applied %v, want nothing", applied)
	}
	recorded, err := migrations.Applied(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(recorded, want) {
		t.Errorf("recorded %v, want %v", recorded, want)
	}
	var rows uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM "+migrations.Table).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != uint64(len(all)) {
		t.Errorf("%s has %d rows, want %d (one per migration)", migrations.Table, rows, len(all))
	}
	for _, table := range []string{"samples", "allocations"} {
		var n uint64
		err := conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = currentDatabase() AND name = ?", table).Scan(&n)
		if err != nil || n != 1 {
			t.Errorf("table %s: count %d, err %v", table, n, err)
		}
	}
}

// TestCurrentClickHouseDialect runs every migration file through chDB (current ClickHouse).
func TestCurrentClickHouseDialect(t *testing.T) {
	// Files() are paths within the embedded FS, which are also paths relative to this
	// package's directory, where go test runs.
	localtest.CheckWithChDB(t, migrations.Files()...)
}
