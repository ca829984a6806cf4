package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/slicemeter/slicemeter/deploy/local"
)

const (
	e2e   = "github.com/slicemeter/slicemeter/e2e"
	store = "github.com/slicemeter/slicemeter/attribution/store"
	crash = "        " + local.CrashMarker + " ClickHouse (pid 28246) signal: segmentation fault"
)

// fakeGo answers each go test run with the next canned output; a run whose output has a
// FAIL line fails.
type fakeGo struct {
	outputs []string
	runs    [][]string
}

func (f *fakeGo) run(_ context.Context, args []string, w io.Writer) error {
	f.runs = append(f.runs, args)
	if len(f.outputs) == 0 {
		return errors.New("unexpected run")
	}
	out := f.outputs[0]
	f.outputs = f.outputs[1:]
	_, _ = io.WriteString(w, out)
	if strings.Contains(out, "\nFAIL") || strings.HasPrefix(out, "FAIL") || strings.Contains(out, "no Go files") {
		return errors.New("exit status 1")
	}
	return nil
}

func TestRun(t *testing.T) {
	passed := "ok  \t" + store + "\t12.1s\n?   \tgithub.com/slicemeter/slicemeter/cmd\t[no test files]\nok  \t" + e2e + "\t700.2s\n"
	crashed := "ok  \t" + store + "\t12.1s\n" +
		"--- FAIL: TestAttributionRecomputationSurvivesRestarts (61.42s)\n    attribution_recompute_test.go:75: not ready\n    database.go:73: the ClickHouse server died during the test: …\n" + crash + "\n" +
		"--- FAIL: TestFleetAPI (2.00s)\n    fleet_test.go:10: the ClickHouse server under the tests is gone: …\n" + crash + "\n" +
		"    --- FAIL: TestFleetAPI/sub (0.00s)\n" +
		"FAIL\n" +
		"FAIL\t" + e2e + "\t1096.0s\n"
	plainFail := "--- FAIL: TestScenarios (1.00s)\n    scenarios_test.go:5: cost 1.2, want 1.3\nFAIL\nFAIL\t" + store + "\t3.0s\n"
	rerun := []string{"-count=1", "-timeout", "40m", "-run", "^(TestAttributionRecomputationSurvivesRestarts|TestFleetAPI)$", e2e}
	for _, tc := range []struct {
		name    string
		args    []string
		outputs []string
		code    int
		runs    [][]string // after the first
		says    []string
	}{
		{name: "passed", outputs: []string{passed}, code: 0},
		{name: "failed without a crash", outputs: []string{plainFail}, code: 1, says: []string{store + " failed with no server crash"}},
		{name: "crash, then passed", outputs: []string{crashed, "ok  \t" + e2e + "\t80.0s\n"}, code: 0, runs: [][]string{rerun},
			says: []string{"its 2 failed tests (TestAttributionRecomputationSurvivesRestarts, TestFleetAPI)", "signal: segmentation fault", e2e + " passed when run again"}},
		{name: "crash, then failed", outputs: []string{crashed, "--- FAIL: TestFleetAPI (1.00s)\nFAIL\nFAIL\t" + e2e + "\t80.0s\n"}, code: 1, runs: [][]string{rerun},
			says: []string{e2e + " failed again"}},
		{name: "crash twice", outputs: []string{crashed, crashed}, code: 1, runs: [][]string{rerun}, says: []string{"a server crashed again", "failed again"}},
		{name: "crash and a panic: the whole package again", outputs: []string{"--- FAIL: TestFleetAPI (2.00s)\n" + crash + "\npanic: test timed out after 40m0s\nFAIL\t" + e2e + "\t2400.0s\n", "ok  \t" + e2e + "\t700.0s\n"},
			code: 0, runs: [][]string{{"-count=1", "-timeout", "40m", e2e}}, says: []string{"running all its tests once more"}},
		{name: "crash after every test passed (the harness's exit status)", outputs: []string{"localtest: the shared server died during the tests: …\n" + local.CrashMarker + " Kafka (pid 3) signal: aborted\nFAIL\t" + e2e + "\t700.0s\n", "ok  \t" + e2e + "\t700.0s\n"},
			code: 0, runs: [][]string{{"-count=1", "-timeout", "40m", e2e}}},
		{name: "a crash and a plain failure", outputs: []string{plainFail + crashed, "ok  \t" + e2e + "\t80.0s\n"}, code: 1, runs: [][]string{rerun},
			says: []string{store + " failed with no server crash", e2e + " passed when run again"}},
		{name: "go test failed outside any package", outputs: []string{"FAIL: no Go files in /x\n"}, code: 1, says: []string{"go test failed"}},
		{name: "no --", args: []string{"-count=1", "./..."}, code: 2},
		{name: "no packages", args: []string{"-count=1", "--"}, code: 2},
		{name: "-json", args: []string{"-json", "--", "./..."}, code: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if args == nil {
				args = []string{"-count=1", "-timeout", "40m", "--", "./..."}
			}
			f := &fakeGo{outputs: tc.outputs}
			var out strings.Builder
			if code := run(context.Background(), args, &out, f.run); code != tc.code {
				t.Errorf("exit status %d, want %d\n%s", code, tc.code, out.String())
			}
			if tc.code == 2 {
				if len(f.runs) != 0 {
					t.Errorf("ran go test %v on a usage error", f.runs)
				}
				return
			}
			if want := []string{"-count=1", "-timeout", "40m", "./..."}; !reflect.DeepEqual(f.runs[0], want) {
				t.Errorf("first run %q, want %q", f.runs[0], want)
			}
			if got := f.runs[1:]; !reflect.DeepEqual(got, tc.runs) && len(got)+len(tc.runs) > 0 {
				t.Errorf("runs after the first %q, want %q", got, tc.runs)
			}
			if len(f.outputs) != 0 {
				t.Errorf("%d canned outputs left unused", len(f.outputs))
			}
			for _, s := range tc.says {
				if !strings.Contains(out.String(), s) {
					t.Errorf("output lacks %q:\n%s", s, out.String())
				}
			}
			for _, o := range tc.outputs {
				if !strings.Contains(out.String(), o) {
					t.Errorf("go test's output not copied: %q", o)
				}
			}
		})
	}
}

// scan's reading of go test's output, checked against the real go command: two packages run
// together, one with a failing test that prints the crash mark and a failing subtest.
func TestScanRealGoTest(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs go test on a module of its own")
	}
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":         "module example.com/m\n\ngo 1.22\n",
		"a/a_test.go":    "package a\n\nimport \"testing\"\n\nfunc TestOK(t *testing.T) {}\n\nfunc TestDied(t *testing.T) {\n\tt.Errorf(\"the ClickHouse server died during the test: …\\n" + local.CrashMarker + " ClickHouse (pid 1) signal: segmentation fault\")\n}\n\nfunc TestSub(t *testing.T) {\n\tt.Run(\"x\", func(t *testing.T) { t.Fail() })\n}\n",
		"b/b_test.go":    "package b\n\nimport \"testing\"\n\nfunc TestOK(t *testing.T) {}\n",
		"c/c.go":         "package c\n",
		"d/d_test.go":    "package d\n\nimport \"testing\"\n\nfunc TestPanics(t *testing.T) { panic(\"boom\") }\n",
		"e/e_test.go":    "package e\n\nimport \"testing\"\n\nfunc TestNoCompile(t *testing.T) { undefined() }\n",
		"a/doc.go":       "package a\n",
		"b/doc.go":       "package b\n",
		"d/doc.go":       "package d\n",
		"e/doc.go":       "package e\n",
		"z/z_test.go":    "package z\n\nimport \"testing\"\n\nfunc TestZ(t *testing.T) {}\n",
		"z/zz/z_test.go": "package zz\n\nimport \"testing\"\n\nfunc TestZZ(t *testing.T) {}\n",
	}
	for name, text := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	var out strings.Builder
	res, err := runScanned(context.Background(), goTest, []string{"-count=1", "./..."}, &out)
	if err == nil {
		t.Fatalf("go test passed:\n%s", out.String())
	}
	got := map[string]pkgResult{}
	for _, p := range res {
		got[strings.TrimPrefix(p.pkg, "example.com/m/")] = p
	}
	want := map[string]pkgResult{
		"a":    {failed: true, tests: []string{"TestDied", "TestSub"}, crash: local.CrashMarker + " ClickHouse (pid 1) signal: segmentation fault"},
		"b":    {},
		"c":    {},
		"d":    {failed: true, tests: []string{"TestPanics"}, cut: true},
		"e":    {failed: true},
		"z":    {},
		"z/zz": {},
	}
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("package %s: not found in the output", name)
			continue
		}
		g.pkg = ""
		if !reflect.DeepEqual(g, w) {
			t.Errorf("package %s: %+v, want %+v", name, g, w)
		}
	}
	if t.Failed() {
		t.Logf("go test's output:\n%s", out.String())
	}
}

// A line too long for the scanner ends the scan, not the copy: what follows still reaches
// the output.
func TestRunScannedCopiesPastALongLine(t *testing.T) {
	long := strings.Repeat("x", 17<<20)
	f := &fakeGo{outputs: []string{"--- FAIL: TestA (1.00s)\n" + long + "\nthe rest\nFAIL\t" + e2e + "\t1.0s\n"}}
	var out strings.Builder
	if _, err := runScanned(context.Background(), f.run, nil, &out); err == nil {
		t.Fatal("the run did not fail")
	}
	if !strings.HasSuffix(out.String(), "the rest\nFAIL\t"+e2e+"\t1.0s\n") {
		t.Errorf("output after the long line lost: ends %q", out.String()[max(0, out.Len()-40):])
	}
}
