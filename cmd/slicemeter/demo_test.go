//go:build !exporter_only

package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
)

const demoSmall = "testdata/demo-small.yaml" // 10 minutes from 2026-01-05T00:00:00Z

// TestDemoIgnoresEnvironment: with SLICEMETER_CLICKHOUSE_DSN and SLICEMETER_KAFKA_BROKERS
// exported for the real services, `slicemeter demo` still starts its own ClickHouse and
// embedded broker: it creates nothing in that database, and says that it ignored them.
func TestDemoIgnoresEnvironment(t *testing.T) {
	localtest.SkipShort(t, "runs the demo on a ClickHouse it starts")
	other := localtest.Database(t, localtest.DatabaseOptions{Unmigrated: true})
	t.Setenv("SLICEMETER_CLICKHOUSE_DSN", other.DSN)
	t.Setenv("SLICEMETER_KAFKA_BROKERS", "127.0.0.1:1") // nothing listens there
	var stdout, stderr bytes.Buffer
	if code := run([]string{"demo", "--scenario", demoSmall, "--fast", "--web.listen-address=", "--report", os.DevNull}, &stdout, &stderr); code != exitOK {
		t.Fatalf("demo exited %d:\n%s", code, stderr.String())
	}
	var tables uint64
	if err := other.Conn.QueryRow(context.Background(), "SELECT count() FROM system.tables WHERE database = ?", other.Name).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Errorf("the demo created %d tables in the database SLICEMETER_CLICKHOUSE_DSN names", tables)
	}
	for _, v := range []string{"SLICEMETER_CLICKHOUSE_DSN", "SLICEMETER_KAFKA_BROKERS"} {
		if !strings.Contains(stderr.String(), "the demo ignores "+v) {
			t.Errorf("the demo does not say it ignored %s:\n%s", v, stderr.String())
		}
	}
}

// TestDemoDatabaseAnswers: after `slicemeter demo --clickhouse.dsn DSN`, the commands that read
// the stored attribution minutes work over the demo's window, on that database (the demo ran
// the attribution service's passes); --no-attribution.store-minutes leaves them to a service.
func TestDemoDatabaseAnswers(t *testing.T) {
	localtest.SkipShort(t, "runs the demo on ClickHouse")
	db := localtest.Database(t, localtest.DatabaseOptions{Unmigrated: true})
	var stdout, stderr bytes.Buffer
	if code := run([]string{"demo", "--scenario", demoSmall, "--fast", "--web.listen-address=", "--report", os.DevNull, "--clickhouse.dsn", db.DSN}, &stdout, &stderr); code != exitOK {
		t.Fatalf("demo exited %d:\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "slicemeter fleet --clickhouse.dsn ") {
		t.Errorf("the demo does not say how to read its database:\n%s", stderr.String())
	}
	window := []string{"--clickhouse.dsn", db.DSN, "--scenario", demoSmall, "--from", "2026-01-05T00:00:00Z", "--to", "2026-01-05T00:10:00Z"}
	for _, args := range [][]string{
		append([]string{"fleet"}, window...),
		append([]string{"report", "--from-minutes"}, window...),
		{"statement", "--clickhouse.dsn", db.DSN, "--scenario", demoSmall, "--tenant", "acme", "--period", "2026-01", "-o", filepath.Join(t.TempDir(), "acme.html")},
	} {
		stdout.Reset()
		stderr.Reset()
		if code := run(args, &stdout, &stderr); code != exitOK {
			t.Errorf("slicemeter %s after the demo exited %d:\n%s", strings.Join(args, " "), code, stderr.String())
		} else if args[0] != "statement" && !strings.Contains(stdout.String(), "2026-01-05T00:10:00Z") {
			t.Errorf("slicemeter %s after the demo printed no row of the window:\n%s", args[0], stdout.String())
		}
	}

	// Without the minutes (the e2e tests that start an attribution service on the demo's data).
	bare := localtest.Database(t, localtest.DatabaseOptions{Unmigrated: true, Name: db.Name + "_bare"})
	stderr.Reset()
	if code := run([]string{"demo", "--scenario", demoSmall, "--fast", "--web.listen-address=", "--report", os.DevNull, "--clickhouse.dsn", bare.DSN,
		"--no-attribution.store-minutes"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("demo --no-attribution.store-minutes exited %d:\n%s", code, stderr.String())
	}
	var minutes uint64
	if err := bare.Conn.QueryRow(context.Background(), "SELECT count() FROM attribution_minutes").Scan(&minutes); err != nil || minutes != 0 {
		t.Errorf("--no-attribution.store-minutes: %d rows in attribution_minutes (%v), want none", minutes, err)
	}
}
