//go:build !exporter_only

package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunExitCodes(t *testing.T) {
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--help"}, exitOK, "demo"},
		{[]string{"report", "--help"}, exitOK, "--clickhouse.dsn"},
		{[]string{"nope"}, exitUsage, "expected command"},
		{[]string{"report", "--from", "x", "--to", "y", "--scenario", "../../schemas/scenario/testdata/mig-basic.yaml"}, exitUsage, `--from "x"`},
		{[]string{"report", "--from", "2026-01-05T00:00:00Z", "--to", "2026-01-05T01:00:00Z"}, exitUsage, "price book is required"},
		{[]string{"report", "--from", "2026-01-05T01:00:00Z", "--to", "2026-01-05T00:00:00Z", "--scenario", "x.yaml"}, exitUsage, "must be after"},
		{[]string{"attribution", "--attribution.interval", "0s", "--scenario", "x.yaml"}, exitUsage, "must be > 0"},
		{[]string{"attribution", "--attribution.presence", "30s", "--scenario", "x.yaml"}, exitUsage, "--attribution.presence: presence period 30s: expected at least a minute"},
		{[]string{"attribution", "--attribution.presence", "0s", "--api.insecure-no-auth", "--scenario", "x.yaml"}, exitUsage, "--attribution.presence: presence period 0s"},
		{[]string{"report", "--from", "2026-01-05T00:00:00Z", "--to", "2026-01-05T01:00:00Z", "--attribution.presence", "0s", "--scenario", "x.yaml"},
			exitUsage, "--attribution.presence: presence period 0s"},
		{[]string{"attribution", "--billing.close-after=-1h", "--scenario", "x.yaml"}, exitUsage, "--billing.close-after -1h0m0s"},
		{[]string{"attribution", "--scenario", "x.yaml"}, exitUsage, "needs authentication: give --api.auth-file FILE (tokens, JWT), or --api.insecure-no-auth"},
		{[]string{"attribution", "--api.insecure-no-auth", "--api.auth-file", "a.yaml", "--scenario", "x.yaml"}, exitUsage, "expected one of them"},
		{[]string{"attribution", "--api.auth-file", "testdata/bad-auth.yaml", "--pricebook", "../../attribution/pricebook/testdata/prices.yaml"},
			exitUsage, `testdata/bad-auth.yaml:3: tokens[0].hash: not a bcrypt hash`},
		{[]string{"report", "--from", "2026-01-05T00:00:00Z", "--to", "2026-01-05T01:00:00Z", "--step", "1w", "--scenario", "x.yaml"}, exitUsage, `step "1w"`},
		// Times outside 2000-01-01..2106-02-07 and windows too many to build are refused at
		// once (exit 2), naming the flag, the value as given and the range or the count.
		{[]string{"report", "--from", "0001-01-01T00:00:00Z", "--to", "9999-12-31T00:00:00Z", "--format", "focus", "--scenario", "x.yaml"},
			exitUsage, `--from: "0001-01-01T00:00:00Z"; expected a time from 2000-01-01T00:00:00Z to 2106-02-07T06:28:15Z`},
		{[]string{"report", "--from", "2026-01-01T00:00:00Z", "--to", "2610-08-01T00:00:00Z", "--scenario", "x.yaml"}, exitUsage, `--to: "2610-08-01T00:00:00Z"`},
		{[]string{"report", "--from", "2000-01-01T00:00:00Z", "--to", "2106-02-07T00:00:00Z", "--step", "1m", "--scenario", "../../schemas/scenario/testdata/mig-basic.yaml"},
			exitUsage, "55804320 windows; expected at most 1048576"},
		{[]string{"fleet", "--from", "0001-01-01T00:00:00Z", "--to", "9999-12-31T00:00:00Z", "--scenario", "x.yaml"}, exitUsage, `--from: "0001-01-01T00:00:00Z"`},
		{[]string{"fleet", "--from", "1900-01-01T00:00:00Z", "--to", "2200-01-01T00:00:00Z", "--scenario", "x.yaml"}, exitUsage, "2106-02-07T06:28:15Z"},
		{[]string{"statement", "--tenant", "acme", "--period", "9999-12", "--scenario", "x.yaml"}, exitUsage, `--period: 9999-12; expected a month from 2000-02 to 2106-01`},
		{[]string{"period", "close", "1999-12", "--scenario", "x.yaml"}, exitUsage, "expected a month from 2000-02 to 2106-01"},
		{[]string{"attribution", "--memory.limit", "lots", "--api.insecure-no-auth", "--scenario", "x.yaml"}, exitUsage, `--memory.limit "lots"`},
		{[]string{"pricebook", "check", "../../attribution/pricebook/testdata/prices.yaml"}, exitOK, "ok: USD, 2 GPU models, 2 tiers"},
		{[]string{"pricebook", "check", "testdata/missing-pricebook.yaml"}, exitUsage, "missing-pricebook.yaml"},
		{[]string{"allocations", "import", "testdata/missing-allocations.csv"}, exitUsage, "missing-allocations.csv"},
		{[]string{"collector", "--kafka.brokers", ","}, exitUsage, "names no broker"},
		{[]string{"collector", "--kafka.brokers", "127.0.0.1:1", "--clickhouse.cluster", "a-b"}, exitUsage, "--clickhouse.cluster"},
		{[]string{"demo", "--scenario", "../../schemas/scenario/testdata/missing.yaml"}, exitUsage, "missing.yaml"},
		// A fast demo starting now would stamp samples an hour ahead, which the collector refuses.
		{[]string{"demo", "--scenario", "../../schemas/scenario/testdata/mig-basic.yaml", "--fast", "--sim.start", "now", "--web.listen-address="},
			exitUsage, "samples more than 10m0s ahead are refused"},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		code := run(tt.args, &stdout, &stderr)
		if code != tt.code || !strings.Contains(stdout.String()+stderr.String(), tt.want) {
			t.Errorf("slicemeter %v: exit %d, want %d and output naming %q:\n%s%s", tt.args, code, tt.code, tt.want, stdout.String(), stderr.String())
		}
	}
}

func TestEnvironmentVariables(t *testing.T) {
	t.Setenv("SLICEMETER_FROM", "not-a-time")
	var stdout, stderr bytes.Buffer
	code := run([]string{"report", "--to", "2026-01-05T01:00:00Z", "--scenario", "x.yaml"}, &stdout, &stderr)
	if code != exitUsage || !strings.Contains(stderr.String(), `"not-a-time"`) {
		t.Errorf("SLICEMETER_FROM was not read as --from: exit %d\n%s", code, stderr.String())
	}
}

// An import refused for a tier the price book lacks or an invalid tenant exits 2 naming the
// line, the field and the value, before it reaches ClickHouse (none runs here).
func TestImportRefusesUnknownTierAndInvalidTenant(t *testing.T) {
	const header = "allocation_id,tenant,tier,node,instance_id,requested_at,started_at,ended_at\n"
	const row = "a1,%s,%s,node-a,gpu0,2026-01-05T00:00:00Z,2026-01-05T00:00:10Z,\n"
	dir := t.TempDir()
	book := "../../attribution/pricebook/testdata/prices.yaml"
	for _, tc := range []struct {
		name, tenant, tier string
		pricebook          bool
		want               string
	}{
		{"gold.csv", "acme", "gold", true, `gold.csv:3: tier: "gold"; expected a tier of the price book (budget, pro)`},
		{"reserved.csv", "__unallocated__", "pro", false, `reserved.csv:3: tenant: "__unallocated__"`},
		{"formula.csv", "=HYPERLINK(1)", "pro", true, `formula.csv:3: tenant: "=HYPERLINK(1)"`},
	} {
		file := filepath.Join(dir, tc.name)
		content := header + fmt.Sprintf(row, "acme", "pro") + fmt.Sprintf(row, tc.tenant, tc.tier)
		if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		args := []string{"allocations", "import", "--clickhouse.dsn", "clickhouse://127.0.0.1:1/none", file}
		if tc.pricebook {
			args = append(args, "--pricebook", book)
		}
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, want %d and %q:\n%s%s", args, code, exitUsage, tc.want, stdout.String(), stderr.String())
		}
	}
}
