package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// --version and the version command print the build's version, branch and revision on stdout
// and exit 0, with or without a subcommand.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}, {"exporter", "--version"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(args, &stdout, &stderr); code != exitOK {
				t.Fatalf("exit %d, want 0\n%s", code, stderr.String())
			}
			if stderr.Len() > 0 {
				t.Errorf("stderr not empty:\n%s", stderr.String())
			}
			for _, w := range []string{"slicemeter, version", "branch:", "revision:", "go version:"} {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout.String())
				}
			}
		})
	}
}

// make build stamps the version, revision and branch into the binary (-ldflags -X on
// prometheus/common/version): a misspelt variable would be ignored silently by the linker.
func TestMakeBuildStampsVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	bin := filepath.Join(t.TempDir(), "slicemeter")
	build := exec.Command("make", "-C", "../..", "build", "BIN="+bin, "VERSION=9.8.7-test", "REVISION=0123abc", "BRANCH=testbranch")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v", bin, err)
	}
	for _, w := range []string{"version 9.8.7-test", "branch: testbranch", "revision: 0123abc"} {
		if !strings.Contains(string(out), w) {
			t.Errorf("--version lacks %q:\n%s", w, out)
		}
	}
	_ = os.Remove(bin)
}

// A plain `go build` (no -ldflags) of a git clone reports the commit Go recorded: the revision
// and, as the build date, the commit's time (it printed no build date, and "revision: unknown"
// where Go records no VCS state, which --version now explains). The clone is a copy of this
// working tree committed afresh, so that the code built is the code tested.
func TestPlainGoBuildReportsTheRevision(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=test", "-c", "user.email=test@example.com"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	files, err := exec.Command("git", "-C", "../..", "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		data, err := os.ReadFile(filepath.Join("../..", f))
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the working tree
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-q", "-m", "snapshot")
	revision, when := git("rev-parse", "HEAD"), git("show", "-s", "--format=%cI", "HEAD")
	commitTime, err := time.Parse(time.RFC3339, when)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "slicemeter")
	// The dependencies come from the build cache; the module's own packages compile again
	// (their directory is new). GOFLAGS may turn VCS stamping off (-buildvcs=false).
	build := exec.Command("go", "build", "-buildvcs=true", "-o", bin, "./cmd/slicemeter")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("--version: %v", err)
	}
	for _, w := range []string{"revision: " + revision + ")", "build date:       " + commitTime.UTC().Format(time.RFC3339) + " (commit time)"} {
		if !strings.Contains(string(out), w) {
			t.Errorf("--version lacks %q:\n%s", w, out)
		}
	}
	if strings.Contains(string(out), "records no VCS revision") {
		t.Errorf("--version says no revision is recorded:\n%s", out)
	}
}
