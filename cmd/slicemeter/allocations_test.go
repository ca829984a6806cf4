//go:build !exporter_only

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/allocations"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
)

// An import that moves a stored allocation to another tenant exits 2 naming the line and
// --allow-tenant-moves, and stores nothing of the file; with the flag it is stored.
func TestImportRefusesTenantMoves(t *testing.T) {
	db := localtest.Database(t, localtest.DatabaseOptions{})
	const header = "allocation_id,tenant,tier,node,instance_id,requested_at,started_at,ended_at\n"
	dir := t.TempDir()
	file := func(name, rows string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(header+rows), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tenants := func() string {
		allocs, err := allocations.NewStore(db.Conn).List(context.Background(), "", time.Time{}, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, a := range allocs {
			out = append(out, a.ID+":"+a.Tenant)
		}
		return strings.Join(out, " ")
	}
	first := file("first.csv", "a1,acme,pro,node-a,gpu0,2026-01-05T00:00:00Z,2026-01-05T00:00:10Z,\n")
	move := file("move.csv", "a2,acme,pro,node-a,gpu1,2026-01-05T00:00:00Z,2026-01-05T00:00:10Z,\n"+
		"a1,beta,pro,node-a,gpu0,2026-01-05T00:00:00Z,2026-01-05T00:00:10Z,\n")
	for _, tc := range []struct {
		args    []string
		code    int
		want    string // in stderr
		tenants string // stored after
	}{
		{[]string{first}, exitOK, "", "a1:acme"},
		{[]string{move}, exitUsage, `move.csv: line 3: allocations refused: allocation "a1": moving it from tenant "acme" to "beta" needs --allow-tenant-moves`, "a1:acme"},
		{[]string{"--allow-tenant-moves", move}, exitOK, "", "a1:beta a2:acme"},
	} {
		var stdout, stderr bytes.Buffer
		args := append([]string{"allocations", "import", "--clickhouse.dsn", db.DSN}, tc.args...)
		if code := run(args, &stdout, &stderr); code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, want %d and %q:\n%s%s", tc.args, code, tc.code, tc.want, stdout.String(), stderr.String())
		}
		if got := tenants(); got != tc.tenants {
			t.Errorf("%v: stored %s, want %s", tc.args, got, tc.tenants)
		}
	}
}
