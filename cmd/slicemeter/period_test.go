//go:build !exporter_only

package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/slicemeter/slicemeter/attribution/period"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
)

func TestMain(m *testing.M) { localtest.Main(m) }

// TestPeriodCommands closes a month through the binary's commands on a real ClickHouse, in the
// price book's time zone, and reads it back: show prints the stored report byte for byte, a
// second close is refused, list shows the one close.
func TestPeriodCommands(t *testing.T) {
	db := localtest.Database(t, localtest.DatabaseOptions{})
	slicemeter := func(code int, args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if got := run(append(args, "--clickhouse.dsn", db.DSN), &stdout, &stderr); got != code {
			t.Fatalf("slicemeter %v: exit %d, want %d\n%s%s", args, got, code, stdout.String(), stderr.String())
		}
		return stdout.String() + stderr.String()
	}
	closed := slicemeter(exitOK, "period", "close", "2026-02", "--pricebook", "testdata/pricebook-berlin.yaml")
	if !strings.Contains(closed, "2026-02,1,Europe/Berlin,2026-01-31T23:00:00Z,2026-02-28T23:00:00Z,") {
		t.Errorf("period close: want February in Berlin, version 1:\n%s", closed)
	}
	shown := slicemeter(exitOK, "period", "show", "2026-02")
	p, ok, err := period.Get(t.Context(), db.Conn, period.Month{Year: 2026, Month: 2})
	if err != nil || !ok {
		t.Fatalf("read the closed period: %v %v", ok, err)
	}
	if shown != string(p.Report) || !strings.HasPrefix(shown, "tenant,tier,window_start") ||
		!strings.Contains(shown, "__unallocated__,,2026-01-31T23:00:00Z,2026-02-28T23:00:00Z,,0.000000,,,,,,,,,EUR\n") {
		t.Errorf("period show:\n%q\nstored:\n%q", shown, p.Report)
	}
	if out := slicemeter(exitError, "period", "close", "2026-02", "--pricebook", "testdata/pricebook-berlin.yaml"); !strings.Contains(out, "closed already") {
		t.Errorf("second close: %s", out)
	}
	if out := slicemeter(exitError, "period", "show", "2026-03"); !strings.Contains(out, "2026-03 is not closed") {
		t.Errorf("show of an open period: %s", out)
	}
	list := slicemeter(exitOK, "period", "list")
	if lines := strings.Split(strings.TrimSpace(list), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[1], "2026-02,1,Europe/Berlin,") {
		t.Errorf("period list:\n%s", list)
	}
	for _, args := range [][]string{{"period", "close", "2026-13", "--pricebook", "testdata/pricebook-berlin.yaml"}, {"period", "show", "Feb"}} {
		if out := slicemeter(exitUsage, args...); !strings.Contains(out, "YYYY-MM") {
			t.Errorf("slicemeter %v: %s", args, out)
		}
	}
}
