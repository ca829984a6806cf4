package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/e2e/apptest"
)

func TestBadInput(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	good, err := os.ReadFile(filepath.Join(scenarios, "mig-basic.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(strings.Replace(string(good), "interval: 100ms", "interval: fast", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"unknown flag", []string{"exporter", "--no-such-flag"}, 2, []string{"unknown long flag '--no-such-flag'"}},
		{"unknown command", []string{"frobnicate"}, 2, []string{"expected command"}},
		{"bad scenario", []string{"demo", "--scenario", bad, "--fast"}, 2, []string{bad, "interval", `"fast" is not a duration`}},
		{"missing scenario", []string{"exporter", "--source", "sim"}, 2, []string{"--scenario is required"}},
		{"absent scenario file", []string{"exporter", "--scenario", filepath.Join(dir, "nope.yaml")}, 2, []string{"nope.yaml"}},
		{"bad source", []string{"exporter", "--source", "nvml2"}, 2, []string{"--source", "nvml2"}},
		{"bad report time", []string{"report", "--scenario", filepath.Join(scenarios, "mig-basic.yaml"), "--from", "yesterday", "--to", "2026-01-05T01:00:00Z"}, 2, []string{"--from", "yesterday"}},
		{"clickhouse unreachable", []string{"report", "--clickhouse.dsn", "clickhouse://127.0.0.1:1/x", "--scenario", filepath.Join(scenarios, "mig-basic.yaml"),
			"--from", "2026-01-05T00:00:00Z", "--to", "2026-01-05T01:00:00Z"}, 1, []string{"127.0.0.1:1"}},
		{"kafka security on the embedded broker", []string{"demo", "--scenario", filepath.Join(scenarios, "mig-basic.yaml"), "--kafka.tls.enable"}, 2,
			[]string{"--kafka.tls.* and --kafka.sasl.* need --kafka.brokers"}},
		{"sasl without password file", []string{"collector", "--kafka.brokers", "127.0.0.1:1", "--kafka.sasl.mechanism", "scram-sha-256",
			"--kafka.sasl.username", "u"}, 2, []string{"--kafka.sasl.password-file is empty"}},
		{"absent password file", []string{"exporter", "--scenario", filepath.Join(scenarios, "mig-basic.yaml"), "--kafka.brokers", "127.0.0.1:1",
			"--kafka.sasl.mechanism", "plain", "--kafka.sasl.username", "u", "--kafka.sasl.password-file", filepath.Join(dir, "nope.pw")}, 2,
			[]string{"--kafka.sasl.password-file", "nope.pw"}},
		// An unreachable Kafka is no bad input for the exporter: it starts and queues
		// (TestExporterStartsBeforeKafka).
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := apptest.Run(t, ctx, tt.args...)
			if r.Code != tt.code {
				t.Errorf("exit status %d, want %d\n%s", r.Code, tt.code, r.Stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.Stderr, w) {
					t.Errorf("stderr does not name %q:\n%s", w, r.Stderr)
				}
			}
			if r.Took > 40*time.Second {
				t.Errorf("took %v: an unreachable service must be reported within bounded time", r.Took)
			}
		})
	}
	r := apptest.Run(t, ctx, "--help")
	if r.Code != 0 || !strings.Contains(r.Stderr+r.Stdout, "demo") {
		t.Errorf("--help: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}
