package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
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
