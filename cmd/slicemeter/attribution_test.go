package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/slicemeter/slicemeter/attribution/report"
)

func TestSLAMetricsExposition(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newSLAMetrics(reg)
	eff, jitter, cold := 0.5, 4060*time.Microsecond, 45*time.Second
	start := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	m.set(report.Report{WindowStart: start, WindowEnd: start.Add(time.Hour), Currency: "USD", UnallocatedListCost: 1.5,
		Tenants: []report.Row{
			{Tenant: "acme", Tier: "pro", Currency: "USD", Cost: 1, ListCost: 1, WasteCost: 0.4, OverheadCost: 0.1, Efficiency: &eff, JitterP99: &jitter, ColdStartMax: &cold, ColdStartBreaches: 1},
			{Tenant: "idle", Tier: "budget", Currency: "USD"}, // no efficiency, jitter or cold start: no series
		}})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	text := buf.String()
	for _, want := range []string{
		`slicemeter_tenant_jitter_p99_seconds{currency="USD",tenant="acme",tier="pro"} 0.00406`,
		`slicemeter_tenant_cold_start_breaches{currency="USD",tenant="acme",tier="pro"} 1`,
		`slicemeter_unallocated_list_cost{currency="USD"} 1.5`,
		`slicemeter_attribution_last_success_timestamp_seconds 1.7675748e+09`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("exposition lacks %s\n%s", want, text)
		}
	}
	if strings.Contains(text, `slicemeter_tenant_efficiency_ratio{currency="USD",tenant="idle"`) {
		t.Error("a tenant without metered time has an efficiency series")
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if testing.Short() {
			t.Skip("promtool not installed")
		}
		t.Fatal("promtool not found: run make deps (Debian package prometheus)")
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(text)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

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
		{[]string{"collector", "--kafka.brokers", ","}, exitUsage, "names no broker"},
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
