package main

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// heavyForTheExporter are import paths (prefixes) that a GPU node's exporter has no use for:
// the database driver and schema, Parquet, the attribution and collector wings, the demo's
// stack, a browser for PDFs. Each was once pulled in through a small helper (a DSN redaction,
// the audit doors, the allocation events' check) and cost resident memory on every node.
var heavyForTheExporter = []string{
	"github.com/ClickHouse/",
	"github.com/parquet-go/",
	"github.com/chromedp/",
	"github.com/twmb/franz-go/pkg/kfake",
	module + "attribution",
	module + "collector",
	module + "deploy/",
	module + "internal/chconn",
	module + "schemas/tables",
	module + "schemas/migrations",
	module + "schemas/allocation/eventcheck",
}

// The exporter-only build (-tags exporter_only) links none of the heavy packages.
func TestExporterOnlyBuildLinksNoDatabase(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-tags", "exporter_only", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps -tags exporter_only: %v", stderrOf(err))
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list gave %d packages: %q", len(deps), out)
	}
	for _, dep := range deps {
		for _, heavy := range heavyForTheExporter {
			if strings.HasPrefix(dep, heavy) {
				t.Errorf("the exporter-only build links %s (go list -deps -f '{{.ImportPath}}: {{.Imports}}' -tags exporter_only ./cmd/slicemeter tells through what)", dep)
			}
		}
	}
}

// The exporter-only binary runs the exporter and version, and refuses every other command of
// the full binary with exit status 2 and a message that says which binary to use, whatever
// flags follow.
func TestExporterOnlyBinaryRefusesOtherCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	// make build-exporter, as the docs say: the tag and the same version stamps as make build.
	bin := filepath.Join(t.TempDir(), "slicemeter-exporter")
	build := exec.Command("make", "-C", "../..", "build-exporter", "EXPORTER_BIN="+bin, "VERSION=9.8.7-test")
	if _, err := exec.LookPath("make"); err != nil {
		build = exec.Command("go", "build", "-tags", "exporter_only", "-o", bin, ".")
	}
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", build.Args, err, out)
	}
	for _, name := range commandNames {
		if name == "exporter" || name == "version" {
			continue
		}
		for _, args := range [][]string{{name}, {name, "--from", "2026-01-01T00:00:00Z"}, {"--log.level=debug", name, "--help"}} {
			cmd := exec.Command(bin, args...)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != exitUsage {
				t.Errorf("%v: %v, want exit status %d\n%s", args, err, exitUsage, out)
			}
			want := "this binary is the exporter only; use the full slicemeter binary for " + name
			if !strings.Contains(string(out), want) {
				t.Errorf("%v: output lacks %q:\n%s", args, want, out)
			}
		}
	}
	if _, err := exec.LookPath("make"); err == nil {
		out, err := exec.Command(bin, "version").Output()
		if err != nil || !strings.Contains(string(out), "version 9.8.7-test") || !strings.Contains(string(out), "exporter_only") {
			t.Errorf("version: %v, want version 9.8.7-test and the tag exporter_only:\n%s", err, out)
		}
	}
	for _, args := range [][]string{{"exporter", "--help"}, {"version"}, {"--help"}} {
		out, err := exec.Command(bin, args...).Output()
		if err != nil {
			t.Errorf("%v: %v", args, stderrOf(err))
		}
		if args[0] == "--help" && (!strings.Contains(string(out), "exporter") || strings.Contains(string(out), "report")) {
			t.Errorf("--help lists other commands than the exporter's:\n%s", out)
		}
		if args[0] == "exporter" && !strings.Contains(string(out), "--kafka.brokers") {
			t.Errorf("exporter --help lacks --kafka.brokers:\n%s", out)
		}
	}
}

// stderrOf is err with the stderr of the command that failed, if it kept it.
func stderrOf(err error) string {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return err.Error() + "\n" + string(exit.Stderr)
	}
	return err.Error()
}
