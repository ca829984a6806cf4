// Command testrun is `make test`'s `go test`: it runs go test over the packages, copying its
// output, and when a package failed in a run where a server under its tests crashed, runs
// that package's failed tests once more, on fresh servers.
//
//	go run ./deploy/local/testrun [go test flags] -- packages...
//
// Why: ClickHouse 18.16, the only server Debian packages and the one the tests start, dies of
// a segmentation fault in its own code now and then under the tests' load (in different tests,
// with no query of ours known to cause it), and every later test of the package fails with it. The test harness (deploy/local/localtest) prints
// local.CrashMarker when a server it started died of a signal of its own fault (SIGSEGV, SIGBUS,
// SIGILL, SIGFPE, SIGABRT; not SIGKILL, so not the OOM killer). Only such a package is run
// again, once: its failed tests, or all of it when a panic or a timeout cut it short. A
// failure without the mark, or again in the second run, fails `make test`. Exit status: 0 when
// everything passed (in the first run, or in the second for crashed packages), 1 otherwise,
// 2 for a usage error.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, goTest)
	stop()
	os.Exit(code)
}

// goTest runs `go test args...` with its stdout and stderr, in order, on w; a cancelled ctx
// interrupts it as Ctrl-C would, so that the test binaries stop their servers.
func goTest(ctx context.Context, args []string, w io.Writer) error {
	cmd := exec.CommandContext(ctx, goCommand(), append([]string{"test"}, args...)...)
	cmd.Stdout, cmd.Stderr = w, w
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = time.Minute
	return cmd.Run()
}

// goCommand is the go that runs this program (`make GO=…`), else the one on PATH.
func goCommand() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}

// runner runs `go test args...` writing its output to w; an error is a failed run.
type runner func(ctx context.Context, args []string, w io.Writer) error

func run(ctx context.Context, args []string, stdout io.Writer, goTest runner) int {
	flags, pkgs, err := splitArgs(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testrun: %v\nusage: testrun [go test flags] -- packages...\n", err)
		return 2
	}
	first, runErr := runScanned(ctx, goTest, append(append([]string{}, flags...), pkgs...), stdout)
	if runErr == nil {
		return 0
	}
	failed := failedPackages(first)
	if len(failed) == 0 {
		// go test failed before or outside any package's tests (a bad flag, a missing package).
		fmt.Fprintf(stdout, "testrun: go test failed: %v\n", runErr)
		return 1
	}
	code := 0
	for _, p := range failed {
		if p.crash == "" {
			fmt.Fprintf(stdout, "testrun: %s failed with no server crash under its tests: not run again\n", p.pkg)
			code = 1
			continue
		}
		if err := ctx.Err(); err != nil {
			return 1
		}
		sel := append([]string{}, flags...)
		what := "all its tests"
		if !p.cut && len(p.tests) > 0 {
			sel = append(sel, "-run", "^("+strings.Join(p.tests, "|")+")$")
			what = fmt.Sprintf("its %d failed tests (%s)", len(p.tests), strings.Join(p.tests, ", "))
		}
		fmt.Fprintf(stdout, "testrun: %s failed after a server under its tests crashed:\n  %s\ntestrun: running %s once more\n", p.pkg, p.crash, what)
		again, err := runScanned(ctx, goTest, append(sel, p.pkg), stdout)
		if err != nil {
			if f := failedPackages(again); len(f) > 0 && f[0].crash != "" {
				fmt.Fprintf(stdout, "testrun: %s: a server crashed again: %s\n", p.pkg, f[0].crash)
			}
			fmt.Fprintf(stdout, "testrun: %s failed again\n", p.pkg)
			code = 1
			continue
		}
		fmt.Fprintf(stdout, "testrun: %s passed when run again; its first run had failed after a server crash (above)\n", p.pkg)
	}
	return code
}

// splitArgs splits testrun's arguments at "--": go test's flags before, packages after.
func splitArgs(args []string) (flags, pkgs []string, err error) {
	for i, a := range args {
		if a == "--" {
			flags, pkgs = args[:i], args[i+1:]
			if len(pkgs) == 0 {
				return nil, nil, errors.New("no packages after --")
			}
			for _, f := range flags {
				if f == "-json" || strings.HasPrefix(f, "-json=") || f == "-v" || strings.HasPrefix(f, "-v=") {
					return nil, nil, fmt.Errorf("go test flag %s: testrun reads go test's plain output", f)
				}
			}
			return flags, pkgs, nil
		}
	}
	return nil, nil, errors.New("missing -- before the packages")
}

// runScanned runs go test with args, copying its output to w as it comes, and returns what
// it said about each package.
func runScanned(ctx context.Context, goTest runner, args []string, w io.Writer) ([]pkgResult, error) {
	pr, pw := io.Pipe()
	done := make(chan []pkgResult, 1)
	go func() {
		res := scan(io.TeeReader(pr, w))
		_, _ = io.Copy(w, pr) // after a line too long for scan: the rest, unscanned but shown
		done <- res
	}()
	err := goTest(ctx, args, pw)
	pw.Close()
	return <-done, err
}

// pkgResult is one package's part of go test's output.
type pkgResult struct {
	pkg    string
	failed bool
	tests  []string // the top-level tests that failed
	crash  string   // the first local.CrashMarker line, "" if none
	cut    bool     // a panic or the timeout ended the test binary early
}

var (
	// go test's last line for a package: "ok  \tPKG\t1.2s", "FAIL\tPKG\t3.4s",
	// "FAIL\tPKG [build failed]", "?   \tPKG\t[no test files]".
	pkgLine = regexp.MustCompile(`^(ok  |FAIL|\?   )\t(\S+)`)
	// A failed top-level test (subtests are indented).
	failLine = regexp.MustCompile(`^--- FAIL: (\S+) \(`)
)

// scan reads go test's plain output. Without -v or -json go test prints each package's output
// as one block ending in the package's line, so what comes before that line is the package's.
func scan(r io.Reader) []pkgResult {
	var res []pkgResult
	var cur pkgResult
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case failLine.MatchString(line):
			cur.tests = append(cur.tests, failLine.FindStringSubmatch(line)[1])
		case strings.HasPrefix(line, "panic: "):
			cur.cut = true
		case strings.Contains(line, local.CrashMarker):
			if cur.crash == "" {
				cur.crash = strings.TrimSpace(line[strings.Index(line, local.CrashMarker):])
			}
		case pkgLine.MatchString(line):
			m := pkgLine.FindStringSubmatch(line)
			cur.pkg, cur.failed = m[2], m[1] == "FAIL"
			res = append(res, cur)
			cur = pkgResult{}
		}
	}
	return res
}

func failedPackages(res []pkgResult) []pkgResult {
	var out []pkgResult
	for _, p := range res {
		if p.failed {
			out = append(out, p)
		}
	}
	return out
}
