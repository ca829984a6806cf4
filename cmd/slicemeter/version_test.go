package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
