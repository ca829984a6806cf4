//go:build !exporter_only

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
)

// TestAdviseCommand runs a public scenario through the whole pipeline (`slicemeter demo --fast`:
// simulator, exporter, Kafka, collector and its rollups) into ClickHouse and advises on its hour
// through the binary from samples_1m: the hand-computed advice of attribution/advice/testdata;
// bad flags exit 2 naming the flag.
func TestAdviseCommand(t *testing.T) {
	localtest.SkipShort(t, "an hour of a scenario through the pipeline")
	db := localtest.Database(t, localtest.DatabaseOptions{})
	scenario := filepath.Join("..", "..", "schemas", "scenario", "testdata", "outage-coldstart.yaml")
	slicemeter := func(code int, args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if got := run(args, &stdout, &stderr); got != code {
			t.Fatalf("slicemeter %v: exit %d, want %d\n%s%s", args, got, code, stdout.String(), stderr.String())
		}
		return stdout.String() + stderr.String()
	}
	slicemeter(exitOK, "demo", "--scenario", scenario, "--fast", "--clickhouse.dsn", db.DSN, "--report", filepath.Join(t.TempDir(), "report.csv"))
	advise := []string{"advise", "--clickhouse.dsn", db.DSN, "--scenario", scenario, "--from", "2026-01-05T00:00:00Z", "--to", "2026-01-05T01:00:00Z"}
	want, err := os.ReadFile(filepath.Join("..", "..", "attribution", "advice", "testdata", "outage-coldstart.advice.csv"))
	if err != nil {
		t.Fatal(err)
	}
	// The demo names allocations scenario/tenant/index, the tests' database tenant-index.
	got := strings.ReplaceAll(slicemeter(exitOK, append(advise, "--advise.min-measured", "10m")...), "outage-coldstart/", "")
	for _, tenant := range []string{"fastco", "slowco", "wholeco"} {
		got = strings.Replace(got, tenant+"/0,", tenant+"-0,", 1)
	}
	if got != string(want) {
		t.Errorf("advice:\n%s\nwant:\n%s", got, want)
	}
	// The default minimum of an hour: every allocation of the hour is unknown.
	if got := slicemeter(exitOK, advise...); strings.Count(got, ",unknown,") != 3 {
		t.Errorf("with the default minimum measured time, want 3 unknown:\n%s", got)
	}
	fleet := slicemeter(exitOK, append(advise, "--advise.min-measured", "10m", "--by", "model", "--format", "json")...)
	// wholeco frees (1 − 1/7) × 58 min / 60 min, slowco (3/7 − 2/7) × 59m15s / 60 min.
	for _, w := range []string{`"model": "A100-SXM4-40GB"`, `"model": "__fleet__"`, `"gpu_equivalents_freed": 0.969643`, `"savings": 1.153714`} {
		if !strings.Contains(fleet, w) {
			t.Errorf("fleet summary lacks %s:\n%s", w, fleet)
		}
	}
	for _, bad := range [][]string{
		{"--advise.compute-headroom", "-0.1", "--advise.compute-headroom"}, {"--advise.min-measured", "soon", "--advise.min-measured"},
		{"--by", "rack", "allocation,tenant,model"}, {"--from", "yesterday", "--from"},
		{"--from", "2026-01-01T00:00:00Z", "--from"}, // a window over 92 days
	} {
		args := []string{"advise", "--clickhouse.dsn", db.DSN, "--scenario", scenario, "--to", "2026-06-01T00:00:00Z", bad[0], bad[1]}
		if out := slicemeter(exitUsage, args...); !strings.Contains(out, bad[2]) {
			t.Errorf("%v: the error does not name %s: %s", bad[:2], bad[2], out)
		}
	}
}
