package apptest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	// startTimeout bounds the wait for a service's listen address and its /readyz.
	startTimeout = 60 * time.Second
	// stopGrace is how long a stopped process has to exit after SIGTERM before it is killed.
	stopGrace = 15 * time.Second
)

// Service is how a long-running command is started.
type Service struct {
	// Command is the subcommand: exporter, collector, attribution or demo.
	Command string
	// Args follow the command. Without --web.listen-address, 127.0.0.1:0 is added.
	Args []string
	// NoReadyz returns as soon as the listen address is known, without waiting for /readyz:
	// for a service whose endpoints need credentials (--web.config.file), or one the test
	// watches become ready itself.
	NoReadyz bool
	// NoListen: the service serves no HTTP (--web.listen-address ""); Start returns once the
	// process has started.
	NoListen bool
}

// Process is a running slicemeter service. It is stopped when the test ends, if it still runs.
type Process struct {
	name string
	cmd  *exec.Cmd
	log  *logWriter

	done    chan struct{} // closed when the process has exited
	waitErr error         // its exit, once done is closed

	stopOnce sync.Once
	stopErr  error
	t        testing.TB // for keeping its /metrics when stopped
}

// StartExporter starts `slicemeter exporter args...` and waits until it is ready.
func StartExporter(t testing.TB, ctx context.Context, args ...string) *Process {
	t.Helper()
	return Start(t, ctx, Service{Command: "exporter", Args: args})
}

// StartCollector starts `slicemeter collector args...` and waits until it is ready.
func StartCollector(t testing.TB, ctx context.Context, args ...string) *Process {
	t.Helper()
	return Start(t, ctx, Service{Command: "collector", Args: args})
}

// StartAttribution starts `slicemeter attribution args...` and waits until it is ready.
func StartAttribution(t testing.TB, ctx context.Context, args ...string) *Process {
	t.Helper()
	return Start(t, ctx, Service{Command: "attribution", Args: args})
}

// StartDemo starts `slicemeter demo args...` (in real time: without --fast) and waits until it
// is ready.
func StartDemo(t testing.TB, ctx context.Context, args ...string) *Process {
	t.Helper()
	return Start(t, ctx, Service{Command: "demo", Args: args})
}

// listening is the line exporter-toolkit logs once it listens, with the bound address.
var listening = regexp.MustCompile(`msg="Listening on" address=(\S+)`)

// Start starts a service and returns once it is ready (see Service). ctx bounds the process's
// life: when it ends, the process is stopped. The process is stopped (SIGTERM, then SIGKILL)
// when t ends; a test that checks how it stops calls Stop itself.
func Start(t testing.TB, ctx context.Context, s Service) *Process {
	t.Helper()
	args := s.Args
	if s.NoListen {
		args = append([]string{"--web.listen-address", ""}, args...)
	} else {
		args = withListenAddress(args)
	}
	p := &Process{name: s.Command, done: make(chan struct{})}
	var err error
	// A file per process, kept to the end of the run for the secrets scan: a restarted
	// service keeps its predecessor's log.
	f, err := outputFile(t, s.Command+".log")
	if err != nil {
		t.Fatal(err)
	}
	p.log = newLogWriter(f, listening)
	p.cmd = exec.CommandContext(ctx, Binary(t), append([]string{s.Command}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	p.cmd.Env = append(os.Environ(), env...)
	// The end of ctx stops the process as Stop does, not with SIGKILL: a test's deferred
	// cancel runs before its cleanups.
	p.cmd.Cancel = func() error { return p.cmd.Process.Signal(syscall.SIGTERM) }
	p.cmd.WaitDelay = stopGrace
	if err := p.cmd.Start(); err != nil {
		p.log.close()
		t.Fatalf("starting slicemeter %s: %v", s.Command, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		p.log.close()
		close(p.done)
	}()
	p.t = t
	t.Cleanup(func() { _ = p.Stop() })
	if s.NoListen {
		return p
	}
	startCtx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	if err := p.waitListening(startCtx); err != nil {
		t.Fatalf("%v\n%s", err, p.LogTail(30))
	}
	if !s.NoReadyz {
		if err := p.waitReady(startCtx); err != nil {
			t.Fatalf("%v\n%s", err, p.LogTail(30))
		}
	}
	return p
}

// withListenAddress adds --web.listen-address 127.0.0.1:0 to args that have none.
func withListenAddress(args []string) []string {
	for _, a := range args {
		if a == "--web.listen-address" || strings.HasPrefix(a, "--web.listen-address=") {
			return args
		}
	}
	return append([]string{"--web.listen-address", "127.0.0.1:0"}, args...)
}

func (p *Process) waitListening(ctx context.Context) error {
	select {
	case <-p.log.found:
		return nil
	case <-p.done:
		return fmt.Errorf("slicemeter %s exited before it listened: %v", p.name, p.waitErr)
	case <-ctx.Done():
		return fmt.Errorf("slicemeter %s logged no listen address: %w", p.name, ctx.Err())
	}
}

func (p *Process) waitReady(ctx context.Context) error {
	u := p.URL("/readyz")
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return err
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("slicemeter %s exited before it was ready: %v", p.name, p.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("slicemeter %s: %s not ready: %w", p.name, u, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Addr is the service's listen address, host:port ("" with Service.NoListen).
func (p *Process) Addr() string { return p.log.match() }

// URL is http://Addr()path.
func (p *Process) URL(path string) string { return "http://" + p.Addr() + path }

// Pid is the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Log is everything the process has written so far, stdout and stderr interleaved.
func (p *Process) Log() string { return p.log.String() }

// LogContains waits up to 10 s for the log to hold substr. A line the process wrote before it
// answered a request may still be in the pipe that carries it here when the answer arrives, so
// a test that checks the log after a response polls instead of reading once.
func (p *Process) LogContains(substr string) bool {
	for until := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if strings.Contains(p.Log(), substr) {
			return true
		}
		if time.Now().After(until) {
			return false
		}
	}
}

// LogTail is the last n lines of Log, for failure messages.
func (p *Process) LogTail(n int) string { return Tail(p.Log(), n) }

// LogPath is the file that holds the log.
func (p *Process) LogPath() string { return p.log.path }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait waits for the process to exit by itself and returns how it exited (nil: status 0).
func (p *Process) Wait(ctx context.Context) error {
	select {
	case <-p.done:
		return p.waitErr
	case <-ctx.Done():
		return fmt.Errorf("waiting for slicemeter %s to exit: %w", p.name, ctx.Err())
	}
}

// Stop stops the process: SIGTERM, and SIGKILL if it has not exited stopGrace later. It
// returns how the process exited (nil: status 0, a clean stop); stopping again returns the
// same.
func (p *Process) Stop() error {
	p.stopOnce.Do(func() {
		p.keepMetrics(p.t)
		p.stopErr = p.signalAndWait(syscall.SIGTERM, stopGrace)
	})
	return p.stopErr
}

// Kill kills the process (SIGKILL) and waits for it to exit, as a crash would.
func (p *Process) Kill() {
	p.stopOnce.Do(func() { p.stopErr = p.signalAndWait(syscall.SIGKILL, stopGrace) })
}

func (p *Process) signalAndWait(sig syscall.Signal, grace time.Duration) error {
	select {
	case <-p.done:
		return p.waitErr
	default:
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signalling slicemeter %s: %w", p.name, err)
	}
	select {
	case <-p.done:
		return p.waitErr
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("slicemeter %s did not exit within %s of %v: killed", p.name, grace, sig)
	}
}

// Tail is the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
