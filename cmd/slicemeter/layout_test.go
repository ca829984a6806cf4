package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/slicemeter/slicemeter/"

// wing ranks a package by where it sits in the data flow (exporter → collector → attribution
// over the contracts in schemas): a package may import only packages of a lower or equal rank.
// Plumbing (internal/, deploy/local) sits below the contracts; the binary, the demo and the
// end-to-end tests sit above everything.
func wing(pkg string) (rank int, name string) {
	p := strings.TrimPrefix(pkg, module)
	switch {
	case strings.HasPrefix(p, "internal/"), p == "deploy/local":
		return 0, "plumbing"
	case strings.HasPrefix(p, "schemas/"), p == "deploy/local/localtest":
		return 1, "schemas"
	case p == "exporter" || strings.HasPrefix(p, "exporter/"):
		return 2, "exporter"
	case p == "collector" || strings.HasPrefix(p, "collector/"):
		return 3, "collector"
	case p == "attribution" || strings.HasPrefix(p, "attribution/"), p == "dashboards", p == "alerts":
		return 4, "attribution"
	}
	return 5, "top"
}

// testHarness is what any package's tests may import whatever its wing: the shared
// ClickHouse and Kafka fixtures and the harness that runs the real binary.
var testHarness = map[string]bool{module + "deploy/local/localtest": true, module + "e2e/apptest": true}

// No wing imports a wing above it: the collector never reaches into attribution, the
// contracts never into a component. Tests are held to it too (their own package's and the
// external _test package's imports), but for the test harness.
func TestWingsImportOnlyDownstream(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}} |{{range .TestImports}} {{.}}{{end}}{{range .XTestImports}} {{.}}{{end}}`, "../../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		code, tests, _ := strings.Cut(sc.Text(), " |")
		fields := strings.Fields(code)
		from, fromName := wing(fields[0])
		check := func(imports []string, what string, allowed map[string]bool) {
			for _, imp := range imports {
				if !strings.HasPrefix(imp, module) || allowed[imp] {
					continue
				}
				if to, toName := wing(imp); to > from {
					t.Errorf("%s (%s)%s %s (%s), a wing above it", fields[0], fromName, what, imp, toName)
				}
			}
		}
		check(fields[1:], " imports", nil)
		check(strings.Fields(tests), "'s tests import", testHarness)
	}
}

// The binary only parses flags into the services' configs: its code stays small. The budget
// holds every command's flags and the Run of the commands that are one function (report,
// fleet, statement, pricebook), which live here rather than in the libraries so that a
// library is called with a plain Config or Options and never sees kingpin
// (TestOnlyTheCommandImportsKingpin), and what only kingpin's model can tell: the start-up
// line's effective flags, help on stdout, the demo's flags that take no environment variable.
// About 1,340 lines with the advise command; the exporter-only build's seam (commands_full.go,
// commands_exporter_only.go, a build constraint on each command's file) adds about 110 lines
// of wiring. Room for a few more flags.
func TestCommandIsOnlyFlagsAndWiring(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	lines := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines += bytes.Count(b, []byte("\n"))
	}
	if lines > 1500 {
		t.Errorf("cmd/slicemeter has %d non-test lines, more than 1500: move what is not flags and wiring into its wing", lines)
	}
}

// Flags are the binary's: kingpin (and exporter-toolkit's kingpin flags) is imported by
// cmd/slicemeter alone, code and tests; every other package takes a plain Config or Options.
func TestOnlyTheCommandImportsKingpin(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}{{range .TestImports}} {{.}}{{end}}{{range .XTestImports}} {{.}}{{end}}`, "../../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if fields[0] == module+"cmd/slicemeter" {
			continue
		}
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, "github.com/alecthomas/kingpin") || imp == "github.com/prometheus/exporter-toolkit/web/kingpinflag" {
				t.Errorf("%s imports %s: register the flags in cmd/slicemeter and pass the library a plain Config or Options", fields[0], imp)
			}
		}
	}
}
