package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/e2e/apptest"
)

// TestDamagedSchemaRefused starts the commands that open ClickHouse against a migrated database
// that lost a column: each exits 2 naming it instead of failing at every query.
func TestDamagedSchemaRefused(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db := localtest.Database(t, localtest.DatabaseOptions{})
	if err := db.Conn.Exec(ctx, "ALTER TABLE attribution_minutes DROP COLUMN overhead_ns"); err != nil {
		t.Fatal(err)
	}
	scenario := filepath.Join(scenarios, "mig-basic.yaml")
	for _, args := range [][]string{
		{"migrate"},
		{"report", "--scenario", scenario, "--from", "2026-01-05T00:00:00Z", "--to", "2026-01-05T01:00:00Z"},
		{"attribution", "--api.insecure-no-auth", "--scenario", scenario, "--web.listen-address", "127.0.0.1:0"},
		{"period", "list"},
	} {
		r := apptest.Run(t, ctx, append(args, "--clickhouse.dsn", db.DSN)...)
		if r.Code != 2 || !strings.Contains(r.Stderr, "attribution_minutes.overhead_ns") || !strings.Contains(r.Stderr, "0022_") {
			t.Errorf("%s against a damaged schema: exit %d, want 2 naming the column and its migration\n%s", args[0], r.Code, r.Stderr)
		}
	}
}
