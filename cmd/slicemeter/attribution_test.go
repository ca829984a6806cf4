package main

import (
	"bytes"
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
		{[]string{"report", "--from", "2026-01-05T00:00:00Z", "--to", "2026-01-05T01:00:00Z", "--step", "1w", "--scenario", "x.yaml"}, exitUsage, `step "1w"`},
		{[]string{"pricebook", "check", "../../attribution/pricebook/testdata/prices.yaml"}, exitOK, "ok: USD, 2 GPU models, 2 tiers"},
		{[]string{"pricebook", "check", "testdata/missing-pricebook.yaml"}, exitUsage, "missing-pricebook.yaml"},
		{[]string{"allocations", "import", "testdata/missing-allocations.csv"}, exitUsage, "missing-allocations.csv"},
		{[]string{"collector", "--kafka.brokers", ","}, exitUsage, "names no broker"},
		{[]string{"collector", "--kafka.brokers", "127.0.0.1:1", "--clickhouse.cluster", "a-b"}, exitUsage, "--clickhouse.cluster"},
		{[]string{"demo", "--scenario", "../../schemas/scenario/testdata/missing.yaml"}, exitUsage, "missing.yaml"},
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
