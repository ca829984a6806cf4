package migrations_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/internal/usage"
	"github.com/slicemeter/slicemeter/schemas/migrations"
)

func TestColumns(t *testing.T) {
	all, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	cols, err := migrations.Columns(all)
	if err != nil {
		t.Fatal(err)
	}
	version := map[string]uint32{}
	for v, cs := range cols {
		for _, c := range cs {
			version[c.String()] = v
		}
	}
	// Each from its CREATE TABLE or ADD COLUMN, the last of a column list included.
	for col, want := range map[string]uint32{
		"samples.time":                      1,
		"samples.vgpu_waits_ns":             1,
		"samples.sm_active_unavailable":     21,
		"allocations.allocation_id":         2,
		"allocations.received":              2,
		"attribution_minutes.overhead_ns":   22,
		"fleet_hours.energy_j":              49,
		"fleet_hour_tenants.energy_j":       0, // dropped by 0059
		"schema_migrations.version":         0, // not a migration's: Apply creates it
		"attribution_minutes.no_such_thing": 0,
	} {
		if got := version[col]; got != want {
			t.Errorf("%s: created by migration %d, want %d", col, got, want)
		}
	}
}

// TestCheckSchema damages migrated databases on the real ClickHouse and checks that CheckSchema,
// Open and OpenMigrated refuse each with a usage error naming the migration or column.
func TestCheckSchema(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))

	db := localtest.Database(t, localtest.DatabaseOptions{})
	if err := migrations.CheckSchema(ctx, db.Conn); err != nil {
		t.Fatalf("CheckSchema of a migrated database: %v", err)
	}
	conn, err := migrations.Open(ctx, db.DSN)
	if err != nil {
		t.Fatalf("Open of a migrated database: %v", err)
	}
	conn.Close()

	all, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	latest := all[len(all)-1]
	tests := []struct {
		name   string
		damage func(t *testing.T, db *localtest.DB)
		want   []string
	}{
		{"newer migration recorded", func(t *testing.T, db *localtest.DB) {
			batch, err := db.Conn.PrepareBatch(ctx, "INSERT INTO "+migrations.Table+" (version, name, applied_at)")
			if err != nil {
				t.Fatal(err)
			}
			if err := batch.Append(uint32(9999), "9999_from_the_future.sql", time.Now().UTC().Truncate(time.Second)); err != nil {
				t.Fatal(err)
			}
			if err := batch.Send(); err != nil {
				t.Fatal(err)
			}
		}, []string{"9999_from_the_future.sql", "newer", latest.Name}},
		{"dropped column", func(t *testing.T, db *localtest.DB) {
			if err := db.Conn.Exec(ctx, "ALTER TABLE attribution_minutes DROP COLUMN overhead_ns"); err != nil {
				t.Fatal(err)
			}
		}, []string{"attribution_minutes.overhead_ns", "0022_attribution_minutes_overhead.sql", "damaged"}},
		{"dropped table", func(t *testing.T, db *localtest.DB) {
			if err := db.Conn.Exec(ctx, "DROP TABLE billing_period_lines"); err != nil {
				t.Fatal(err)
			}
		}, []string{"table billing_period_lines is missing", "0031_billing_periods.sql"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := localtest.Database(t, localtest.DatabaseOptions{})
			tt.damage(t, db)
			check := func(what string, err error) {
				t.Helper()
				if err == nil {
					t.Fatalf("%s of the damaged database succeeded", what)
				}
				t.Logf("%s: %v", what, err)
				if !usage.Is(err) {
					t.Errorf("%s: no usage error (exit 2): %v", what, err)
				}
				for _, w := range tt.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s: error does not name %q: %v", what, w, err)
					}
				}
			}
			check("CheckSchema", migrations.CheckSchema(ctx, db.Conn))
			_, err := migrations.Open(ctx, db.DSN)
			check("Open", err)
			_, err = migrations.OpenMigrated(ctx, db.DSN, "", logger)
			check("OpenMigrated", err)
		})
	}

	t.Run("unmigrated", func(t *testing.T) {
		db := localtest.Database(t, localtest.DatabaseOptions{Unmigrated: true})
		err := migrations.CheckSchema(ctx, db.Conn)
		if err == nil || !usage.Is(err) || !strings.Contains(err.Error(), "not applied") || !strings.Contains(err.Error(), all[0].Name) {
			t.Fatalf("CheckSchema of an empty database: %v, want a usage error naming %s not applied", err, all[0].Name)
		}
		// OpenMigrated applies what is missing, then the check passes.
		conn, err := migrations.OpenMigrated(ctx, db.DSN, "", logger)
		if err != nil {
			t.Fatalf("OpenMigrated of an empty database: %v", err)
		}
		conn.Close()
	})
}
