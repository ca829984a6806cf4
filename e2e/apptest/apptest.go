// Package apptest runs the real slicemeter binary for end-to-end tests: one-shot commands
// (migrate, report, demo, …) to their exit, and the long-running services (exporter, collector,
// attribution, demo) as processes that are stopped when the test ends.
//
// The binary is built from this module once per test binary, by the first test that needs it.
// A service is started on a port the kernel picks (--web.listen-address=127.0.0.1:0); its
// address is read from the line it logs when it listens, and the start returns once /readyz
// answers 200. Every process's output goes to a log file in the test's directory and is kept
// in memory, so that a failure can quote it (Process.LogTail). Main scans all of that output
// for the secrets the tests registered (Secret).
//
// A test binary using apptest calls Main from its TestMain; it also stops the shared servers
// of deploy/local/localtest:
//
//	func TestMain(m *testing.M) { apptest.Main(m) }
package apptest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
)

// mainPackage is the command under test.
const mainPackage = "github.com/slicemeter/slicemeter/cmd/slicemeter"

// env is added to every process's environment. The tests' scenarios lie months before the
// wall clock: a collector's production retention of raw samples (14 days) would drop them at
// its start, so the tests keep them (a flag still wins over the variable).
var env = []string{"SLICEMETER_LOG_LEVEL=info", "SLICEMETER_RETENTION_RAW=0"}

// built is the test binary's slicemeter build, made once by the first test that needs it and
// removed by Main.
var built struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// Main runs the tests, stops localtest's shared servers, removes the built binary and exits
// with the tests' status.
//
// Then it scans the run's output for the registered secrets (Secret): a secret found fails
// the run, each finding naming the file and line (the files are then kept, for a look).
func Main(m *testing.M) {
	code := localtest.Run(m)
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	findings, err := scanSecrets()
	for _, f := range findings {
		fmt.Fprintln(os.Stderr, "apptest: a secret was printed:", f)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "apptest:", err)
	}
	if len(findings) > 0 || err != nil {
		code = max(code, 1)
	} else if captured.dir != "" {
		_ = os.RemoveAll(captured.dir)
	}
	os.Exit(code)
}

// Binary is the path of slicemeter built from this module (the working tree the test runs in).
func Binary(t testing.TB) string {
	t.Helper()
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "slicemeter-apptest-")
		if built.err != nil {
			built.err = fmt.Errorf("creating the binary's directory: %w", built.err)
			return
		}
		built.path = filepath.Join(built.dir, "slicemeter")
		var out bytes.Buffer
		build := exec.Command("go", "build", "-o", built.path, mainPackage)
		build.Stdout, build.Stderr = &out, &out
		if err := build.Run(); err != nil {
			built.err = fmt.Errorf("building %s: %w\n%s", mainPackage, err, out.String())
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

// Result is one run of the binary to its exit.
type Result struct {
	Code           int // exit status
	Stdout, Stderr string
	Took           time.Duration
}

// Run runs slicemeter with args to its exit, whatever its status; it fails t only if the
// binary could not be run at all.
func Run(t testing.TB, ctx context.Context, args ...string) Result {
	t.Helper()
	return RunInput(t, ctx, "", args...)
}

// RunInput is Run with stdin as the command's standard input.
func RunInput(t testing.TB, ctx context.Context, stdin string, args ...string) Result {
	t.Helper()
	cmd := exec.CommandContext(ctx, Binary(t), args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), env...)
	began := time.Now()
	err := cmd.Run()
	r := Result{Stdout: stdout.String(), Stderr: stderr.String(), Took: time.Since(began)}
	keepOutput(t, argsName(args)+".stderr", r.Stderr)
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("running slicemeter %v: %v", args, err)
		}
		r.Code = ee.ExitCode()
	}
	return r
}

// argsName is the subcommand of args, for an output file's name.
func argsName(args []string) string {
	if len(args) == 0 {
		return "slicemeter"
	}
	return args[0]
}

// MustRun is Run that fails t unless the command exits 0, quoting its stderr.
func MustRun(t testing.TB, ctx context.Context, args ...string) Result {
	t.Helper()
	r := Run(t, ctx, args...)
	if r.Code != 0 {
		t.Fatalf("%s exited %d\n%s", args[0], r.Code, r.Stderr)
	}
	return r
}

// Migrate runs `slicemeter migrate --clickhouse.dsn dsn args...`; it fails t unless it exits 0.
func Migrate(t testing.TB, ctx context.Context, dsn string, args ...string) Result {
	t.Helper()
	return MustRun(t, ctx, append([]string{"migrate", "--clickhouse.dsn", dsn}, args...)...)
}

// Report runs `slicemeter report --clickhouse.dsn dsn args...`; it fails t unless it exits 0.
// The report is the Result's Stdout.
func Report(t testing.TB, ctx context.Context, dsn string, args ...string) Result {
	t.Helper()
	return MustRun(t, ctx, append([]string{"report", "--clickhouse.dsn", dsn}, args...)...)
}

// Demo runs `slicemeter demo args...` to its end (with --fast, the whole scenario); it fails t
// unless it exits 0. Without --web.listen-address it serves on a port the kernel picks.
func Demo(t testing.TB, ctx context.Context, args ...string) Result {
	t.Helper()
	return MustRun(t, ctx, append([]string{"demo"}, withListenAddress(args)...)...)
}
