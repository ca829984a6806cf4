package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/e2e/apptest"
)

// TestDSNPasswordNeverPrinted runs the commands that open ClickHouse with DSNs whose password
// is malformed (they fail to parse) or refused, and checks that stderr never quotes the
// password nor a 3-character piece of it.
func TestDSNPasswordNeverPrinted(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	scenario := filepath.Join(scenarios, "mig-basic.yaml")
	commands := [][]string{
		{"migrate"},
		{"report", "--scenario", scenario, "--from", "2026-01-05T00:00:00Z", "--to", "2026-01-05T01:00:00Z"},
		{"attribution", "--api.insecure-no-auth", "--scenario", scenario, "--web.listen-address", "127.0.0.1:0"},
		{"period", "list"},
	}
	dsns := []struct {
		dsn, password string
		code          int
	}{
		{"clickhouse://u:p%zzS3qxv@127.0.0.1:1/db", "p%zzS3qxv", 2},
		{"clickhouse://u:se/cr?tPW@127.0.0.1:1/db", "se/cr?tPW", 2},
		{"clickhouse://127.0.0.1:1/db?password=Tq5zkWv9&dial_timeout=soon", "Tq5zkWv9", 2},
		{"clickhouse://u:Tq5zkWv9@127.0.0.1:1/db", "Tq5zkWv9", 1}, // parses; refused
	}
	for _, d := range dsns {
		apptest.Secret(t, d.password)
	}
	for _, d := range dsns {
		for _, args := range commands {
			args := append(append([]string{}, args...), "--clickhouse.dsn", d.dsn)
			r := apptest.Run(t, ctx, args...)
			if r.Code != d.code {
				t.Errorf("%s with %s: exit status %d, want %d\n%s", args[0], d.dsn, r.Code, d.code, r.Stderr)
			}
			for i := 0; i+3 <= len(d.password); i++ {
				if piece := d.password[i : i+3]; strings.Contains(r.Stderr+r.Stdout, piece) {
					t.Errorf("%s with %s: output quotes %q of the password:\n%s", args[0], d.dsn, piece, r.Stderr)
					break
				}
			}
		}
	}
}
