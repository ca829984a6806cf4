// Package alerts holds slicemeter's Prometheus alerting rules, their tests and an example
// Alertmanager routing. The Go test runs the real promtool and amtool on them.
package alerts

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

func tool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if testing.Short() {
			t.Skipf("%s not installed", name)
		}
		t.Fatalf("%s not found: run make deps (Debian packages prometheus, prometheus-alertmanager)", name)
	}
	return p
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	out, err := exec.Command(tool(t, name), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

func TestRulesCheck(t *testing.T) { run(t, "promtool", "check", "rules", "slicemeter.rules.yml") }

func TestRulesUnitTests(t *testing.T) {
	run(t, "promtool", "test", "rules", "slicemeter.rules.test.yml")
}

// The dcgm-exporter compatibility rules (dcgm-compat.rules.yml) parse, and publish dcgm-exporter's
// names with its labels and units; e2e's TestDCGMCompat runs them in a real Prometheus.
func TestDCGMCompatRules(t *testing.T) {
	run(t, "promtool", "check", "rules", "dcgm-compat.rules.yml")
	run(t, "promtool", "test", "rules", "dcgm-compat.rules.test.yml")
}

func TestAlertmanagerConfig(t *testing.T) {
	run(t, "amtool", "check-config", "alertmanager.example.yml")
}

// Every alert has a test that fires it and a runbook section, and its runbook_url points there.
func TestEveryAlertHasTestAndRunbook(t *testing.T) {
	rules, err := os.ReadFile("slicemeter.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile("slicemeter.rules.test.yml")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	alerts := regexp.MustCompile(`(?m)^\s+- alert: (\w+)`).FindAllStringSubmatch(string(rules), -1)
	if len(alerts) == 0 {
		t.Fatal("no alerts found")
	}
	for _, m := range alerts {
		name := m[1]
		if !strings.Contains(string(tests), "alertname: "+name+"\n        exp_alerts:\n          - exp_labels") {
			t.Errorf("%s: no test case in which it fires", name)
		}
		if !strings.Contains(string(readme), "## "+name+"\n") {
			t.Errorf("%s: no runbook section in README.md", name)
		}
		if !strings.Contains(string(rules), `runbook_url: "alerts/README.md#`+strings.ToLower(name)+`"`) {
			t.Errorf("%s: runbook_url does not point at its section", name)
		}
	}
}
