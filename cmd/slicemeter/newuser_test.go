//go:build !exporter_only

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/schemas/migrations"
)

// The DSN mistakes a new user makes, through the binary: ClickHouse's HTTP port (a real
// server's) and a DSN without a scheme are exit 2 naming what was wrong and the DSN expected.
func TestDSNMistakes(t *testing.T) {
	http := localtest.ClickHouse(t).HTTPAddr()
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"migrate", "--clickhouse.dsn", "clickhouse://" + http + "/metering"},
			[]string{http + ": that is ClickHouse's HTTP port", "native protocol, usually on port 9000", "clickhouse://127.0.0.1:9000/metering"}},
		{[]string{"report", "--from", "2026-01-05", "--to", "2026-01-06", "--scenario", "../../schemas/scenario/testdata/mig-basic.yaml",
			"--clickhouse.dsn", "127.0.0.1:9000/metering"},
			[]string{`"127.0.0.1:9000/metering" has no scheme`, "expected clickhouse://[user[:password]@]host:port/database", "did you mean clickhouse://127.0.0.1:9000/metering?"}},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tt.args, &stdout, &stderr)
		if code != exitUsage {
			t.Errorf("slicemeter %v: exit %d, want 2\n%s", tt.args, code, stderr.String())
		}
		for _, w := range tt.want {
			if !strings.Contains(stderr.String(), w) {
				t.Errorf("slicemeter %v: stderr lacks %q:\n%s", tt.args, w, stderr.String())
			}
		}
		if strings.Contains(stderr.String(), "percent-encode") {
			t.Errorf("slicemeter %v: a percent-encoding hint for a DSN whose problem is elsewhere:\n%s", tt.args, stderr.String())
		}
	}
}

// A database never migrated is one short message, exit 2: the migrations not applied (first
// and last), a few of the tables missing, the schema's version and the one needed, and
// "run slicemeter migrate" once (it was one 2.3 KB line repeating it for every migration).
func TestUnmigratedDatabaseSaysSoOnce(t *testing.T) {
	db := localtest.Database(t, localtest.DatabaseOptions{Unmigrated: true})
	all, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"report", "--from", "2026-01-05", "--to", "2026-01-06", "--scenario", "../../schemas/scenario/testdata/mig-basic.yaml",
		"--clickhouse.dsn", db.DSN}, &stdout, &stderr)
	msg := stderr.String()
	if code != exitUsage || strings.Count(msg, "run slicemeter migrate") != 1 || len(msg) > 700 {
		t.Errorf("report on an unmigrated database: exit %d, want 2 and one line of at most 700 bytes saying to run slicemeter migrate once (%d bytes):\n%s", code, len(msg), msg)
	}
	for _, w := range []string{all[0].Name + " to ", "are not applied (table samples, ", "table attribution_minutes", "its schema is at none, this slicemeter needs " + all[len(all)-1].Name} {
		if !strings.Contains(msg, w) {
			t.Errorf("report on an unmigrated database: stderr lacks %q:\n%s", w, msg)
		}
	}
}

// A scenario with a misspelt field, through the binary: exit 2 naming the file, the line, the
// field and the closest known one (it named the Go type scenario.rawScenario).
func TestScenarioTypoSuggestsTheField(t *testing.T) {
	good, err := os.ReadFile("../../schemas/scenario/testdata/mig-basic.yaml")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "typo.yaml")
	if err := os.WriteFile(path, bytes.Replace(good, []byte("interval: 100ms"), []byte("intervall: 100ms"), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"demo", "--scenario", path}, {"exporter", "--source", "sim", "--scenario", path}} {
		var stdout, stderr bytes.Buffer
		code := run(args, &stdout, &stderr)
		want := path + ": intervall: line 6: field intervall not found (did you mean interval?)"
		if code != exitUsage || !strings.Contains(stderr.String(), want) || strings.Contains(stderr.String(), "rawScenario") {
			t.Errorf("slicemeter %v: exit %d, want 2 and %q:\n%s", args, code, want, stderr.String())
		}
	}
}
