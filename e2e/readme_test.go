package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/e2e/apptest"
)

// readmeBlock is the shell block of ../README.md that follows the HTML comment starting with
// marker.
func readmeBlock(t *testing.T, marker string) string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "<!-- "+marker)
	if !ok {
		t.Fatalf("README.md has no block marked <!-- %s", marker)
	}
	_, after, ok = strings.Cut(after, "```sh\n")
	block, _, ok2 := strings.Cut(after, "```")
	if !ok || !ok2 {
		t.Fatalf("README.md: no ```sh block after <!-- %s", marker)
	}
	return block
}

// listenAddr is a fixed listen address of the README's commands, which the test gives port 0.
var listenAddr = regexp.MustCompile(`127\.0\.0\.1:983[5-9]\b`)

// separateProcessesScript is the README's block with the substitutions its marker documents:
// the test's own build for bin/slicemeter (so `make build` is left out), a temporary
// directory's file for /tmp/slicemeter-stack.env, port 0 for the fixed listen addresses.
func separateProcessesScript(t *testing.T, block, binary, envFile string) string {
	t.Helper()
	var lines []string
	for _, line := range strings.Split(block, "\n") {
		if strings.TrimSpace(line) == "make build" {
			continue
		}
		lines = append(lines, line)
	}
	s := strings.Join(lines, "\n")
	for _, must := range []string{"bin/slicemeter", "/tmp/slicemeter-stack.env", "go run ./deploy/local/stack",
		"slicemeter migrate", "slicemeter collector", "slicemeter attribution", "slicemeter exporter --source sim"} {
		if !strings.Contains(s, must) {
			t.Fatalf("README's separate-processes block lacks %q:\n%s", must, block)
		}
	}
	s = strings.ReplaceAll(s, "bin/slicemeter", binary)
	s = strings.ReplaceAll(s, "/tmp/slicemeter-stack.env", envFile)
	s = listenAddr.ReplaceAllString(s, "127.0.0.1:0")
	return "set -e\n" + s
}

// TestREADMESeparateProcesses runs the README's "Separate processes on one machine" as
// written: the stack program starts ClickHouse and Kafka, then migrate, the collector, the
// attribution service and a simulated exporter run as processes of their own, and the block's
// last command waits until a report bills a tenant. A tenant must be billed (not only
// __unallocated__): the simulated exporter publishes its scenario's allocations.
func TestREADMESeparateProcesses(t *testing.T) {
	localtest.SkipShort(t, "ClickHouse and Kafka")
	t.Parallel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	script := separateProcessesScript(t, readmeBlock(t, "separate-processes"), apptest.Binary(t),
		filepath.Join(t.TempDir(), "slicemeter-stack.env"))

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = root
	// Its own process group, so that the block's background processes are stopped with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Files, not buffers: the block's background processes keep its output open after bash
	// exits, and Wait would wait for them to close pipes.
	dir := t.TempDir()
	stdoutFile, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	defer stdoutFile.Close()
	stderrFile, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderrFile.Close()
	cmd.Stdout, cmd.Stderr = stdoutFile, stderrFile
	var stdout, stderr bytes.Buffer
	readOutput := func() {
		stdout.Reset()
		stderr.Reset()
		if b, err := os.ReadFile(stdoutFile.Name()); err == nil {
			stdout.Write(b)
		}
		if b, err := os.ReadFile(stderrFile.Name()); err == nil {
			stderr.Write(b)
		}
	}
	began := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopGroup := func() {
		// SIGTERM lets the stack stop its servers and remove their directories (Kafka takes a
		// few seconds) and the services flush; whatever is left after a minute gets SIGKILL.
		pgid := cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if syscall.Kill(-pgid, 0) != nil { // ESRCH: the group is empty
				return
			}
		}
		t.Logf("the README's processes did not stop within a minute of SIGTERM; killing them")
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	var runErr error
	select {
	case runErr = <-exited:
	case <-ctx.Done():
		stopGroup()
		<-exited
		readOutput()
		t.Fatalf("the README's block did not finish within 4 minutes\nstdout:\n%s\nstderr:\n%s",
			stdout.String(), apptest.Tail(stderr.String(), 60))
	}
	took := time.Since(began)
	stopGroup()
	readOutput()
	if runErr != nil {
		t.Fatalf("the README's block failed: %v\nstdout:\n%s\nstderr:\n%s", runErr, stdout.String(), apptest.Tail(stderr.String(), 60))
	}
	billed := 0
	for _, line := range strings.Split(stdout.String(), "\n") {
		f := strings.Split(line, ",")
		if len(f) < 5 || strings.HasPrefix(line, "KAFKA=") {
			continue
		}
		if f[0] == "__unallocated__" {
			t.Errorf("the block printed the unallocated row as billed: %s", line)
			continue
		}
		switch f[0] {
		case "acme", "beta", "gamma", "delta":
			billed++
		default:
			t.Errorf("a row of no tenant of demo-fleet: %s", line)
		}
	}
	if billed == 0 {
		t.Fatalf("no tenant billed\nstdout:\n%s", stdout.String())
	}
	t.Logf("from nothing to the first tenant billed, following the README: %s (%d tenant rows)", took.Round(100*time.Millisecond), billed)
}
