// Package local starts real services — ClickHouse, Apache Kafka — on loopback, in a temporary
// directory, on free ports, for `slicemeter demo` and for tests. It never uses a system instance
// (ClickHouse on :9000, Kafka on :9092) and never mocks one.
//
// A started service is a child process of the caller. On Linux it is killed when the caller
// dies, so a crashed or timed-out test leaves nothing behind but its temporary directory.
package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// stopGrace is how long Stop waits after SIGTERM before it sends SIGKILL.
const stopGrace = 10 * time.Second

// FreePort returns a TCP port on 127.0.0.1 that nothing listens on right now. Another process may
// take it before the caller binds it; the services here retry with new ports when that happens.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port on 127.0.0.1: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// process is one started child with its exit observed by a single Wait.
type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed once the child has exited
	err  error         // Wait's result; read only after done is closed
}

// startProcess starts argv[0] with argv[1:] in dir; its stdout and stderr are appended to outPath.
func startProcess(name, dir, outPath string, argv ...string) (*process, error) {
	out, err := os.OpenFile(outPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening %s's output file: %w", name, err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", name, argv[0], err)
	}
	p := &process{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		out.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// exited reports whether the child has exited, and how ("exit status 1", "signal: killed").
func (p *process) exited() (bool, string) {
	select {
	case <-p.done:
		if p.err == nil {
			return true, "exit status 0"
		}
		return true, p.err.Error()
	default:
		return false, ""
	}
}

// crashed reports whether a child's Wait error is a signal of its own fault.
func crashed(waitErr error) bool {
	var ee *exec.ExitError
	if !errors.As(waitErr, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return false
	}
	switch ws.Signal() {
	case syscall.SIGSEGV, syscall.SIGBUS, syscall.SIGILL, syscall.SIGFPE, syscall.SIGABRT:
		return true
	}
	return false
}

// terminate sends SIGTERM, waits up to grace, then SIGKILL. It returns an error only when the
// child had already died on its own (a crash the caller should hear about) or cannot be signalled.
func (p *process) terminate(log *slog.Logger, grace time.Duration) error {
	if dead, why := p.exited(); dead {
		return fmt.Errorf("%s (pid %d) had already exited (%s)", p.name, p.pid(), why)
	}
	if err := signalTree(p.cmd.Process, syscall.SIGTERM); err != nil {
		select {
		case <-p.done: // it exited between the check and the signal
			return nil
		default:
		}
		return fmt.Errorf("sending SIGTERM to %s (pid %d): %w", p.name, p.pid(), err)
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
	}
	log.Warn("service did not stop after SIGTERM; killing it", "service", p.name, "pid", p.pid(), "grace", grace)
	if err := signalTree(p.cmd.Process, syscall.SIGKILL); err != nil {
		select {
		case <-p.done:
			return nil
		default:
		}
		return fmt.Errorf("sending SIGKILL to %s (pid %d): %w", p.name, p.pid(), err)
	}
	<-p.done
	return nil
}

// errGiveUp, wrapped in ready's error, ends waitReady at once: the child will not get ready.
var errGiveUp = errors.New("giving up")

// waitReady polls ready every interval until it returns nil, the child exits, or ctx ends.
// On failure the error carries the tails of the given log files, which is where the reason is.
func (p *process) waitReady(ctx context.Context, interval time.Duration, logs []string, ready func(context.Context) error) error {
	// A check in flight is cut short when the child exits: whatever answers on the port then
	// (the process that won a port race) is not the child.
	checkCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-p.done:
			cancel()
		case <-checkCtx.Done():
		}
	}()
	var last error
	for {
		if dead, why := p.exited(); dead {
			return fmt.Errorf("%s exited during startup (%s)%s", p.name, why, tails(logs))
		}
		if last = ready(checkCtx); last == nil {
			return nil
		}
		if errors.Is(last, errGiveUp) {
			return fmt.Errorf("%s: %w%s", p.name, last, tails(logs))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w (last check: %v)%s", p.name, context.Cause(ctx), last, tails(logs))
		case <-p.done:
		case <-time.After(interval):
		}
	}
}

// portInUse tells whether a failed start was a lost race for a port picked by FreePort.
func portInUse(logs []string) bool {
	for _, path := range logs {
		b, _ := os.ReadFile(path)
		if bytes.Contains(b, []byte("Address already in use")) {
			return true
		}
	}
	return false
}

// tails renders the last lines of each non-empty log file for an error message, after the
// last few error lines, which a stack trace at the end would otherwise push out of view.
func tails(paths []string) string {
	var b strings.Builder
	for _, path := range paths {
		t := tail(path, 30, 8<<10)
		if t == "" {
			continue
		}
		if errs := errorLines(path, 5); errs != "" && !strings.Contains(t, errs) {
			fmt.Fprintf(&b, "\n--- last errors in %s ---\n%s", path, errs)
		}
		fmt.Fprintf(&b, "\n--- last lines of %s ---\n%s", path, t)
	}
	return b.String()
}

// errorLines returns the last n lines of the file's last 256 KiB logged at error level by
// ClickHouse (<Error>) or log4j (ERROR), or naming an exception's cause.
func errorLines(path string, n int) string {
	var hits []string
	for _, line := range strings.Split(tail(path, 1<<20, 256<<10), "\n") {
		if strings.Contains(line, "<Error>") || strings.Contains(line, "] ERROR ") ||
			strings.Contains(line, "] FATAL ") || strings.HasPrefix(line, "Caused by: ") {
			hits = append(hits, line)
		}
	}
	if len(hits) > n {
		hits = hits[len(hits)-n:]
	}
	return strings.Join(hits, "\n")
}

// tail returns up to the last n lines, within the last max bytes, of the file at path.
func tail(path string, n int, max int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	off := st.Size() - max
	if off < 0 {
		off = 0
	}
	buf, err := io.ReadAll(io.NewSectionReader(f, off, st.Size()-off))
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(buf), "\n"), "\n")
	if off > 0 && len(lines) > 1 {
		lines = lines[1:] // the first line is probably cut
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// dialable reports whether something accepts TCP connections at addr.
func dialable(ctx context.Context, addr string) error {
	var d net.Dialer
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return c.Close()
}

// lookFor returns the first of names found on PATH, then the first of paths that is executable.
// Debian installs clickhouse-server in /usr/sbin, which an unprivileged user's PATH lacks.
func lookFor(names []string, paths []string) (string, bool) {
	for _, n := range names {
		if p, err := exec.LookPath(n); err == nil {
			return p, true
		}
	}
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, true
		}
	}
	return "", false
}

func orDefault(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
