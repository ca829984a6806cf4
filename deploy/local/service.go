package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// service is the lifecycle ClickHouse, Kafka and ZooKeeper share: one process at a time,
// data and logs in a directory of its own, stopped and started again on the same ports,
// the directory removed on Close unless kept. The embedding type starts the process (setting
// proc under mu) and says where its logs are, for the errors.
type service struct {
	name    string // in messages: "ClickHouse", "Kafka", "ZooKeeper"
	log     *slog.Logger
	dir     string
	keepDir bool
	logs    func() []string

	mu     sync.Mutex
	proc   *process // nil while stopped
	closed bool
}

// Pid is the server's process id, or 0 while it is stopped.
func (s *service) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.pid()
}

// Died is nil while the server runs (or was stopped on purpose); once its process has exited
// on its own (a crash, the OOM killer) it says how, with the tail of its logs.
func (s *service) Died() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return nil
	}
	return s.died(s.proc)
}

// died is the DiedError of p when it has exited, else nil.
func (s *service) died(p *process) error {
	dead, why := p.exited()
	if !dead {
		return nil
	}
	return &DiedError{Service: s.name, Pid: p.pid(), How: why, Crashed: crashed(p.err), // p.err is set once exited
		machine: machineState(s.dir), logs: tails(s.logs())}
}

// CrashMarker starts the line a test harness prints when a server under the tests crashed
// (DiedError.Crashed): the mark `make test` (deploy/local/testrun) looks for before it runs
// a package's failed tests once more.
const CrashMarker = "slicemeter-test: a server under the tests crashed:"

// DiedError is Died's error: the server's process exited on its own.
type DiedError struct {
	Service string // "ClickHouse", "Kafka", "ZooKeeper"
	Pid     int
	How     string // "signal: segmentation fault", "exit status 1"
	// Crashed: a signal the process gets for its own fault (SIGSEGV, SIGBUS, SIGILL, SIGFPE,
	// SIGABRT), a bug of the server's; not SIGKILL (the OOM killer, a person) or an exit.
	Crashed bool
	machine string // the machine's free disk and memory
	logs    string // the tails of the server's logs
}

func (e *DiedError) Error() string {
	return fmt.Sprintf("%s (pid %d) exited on its own (%s; %s)%s", e.Service, e.Pid, e.How, e.machine, e.logs)
}

// Mark is the CrashMarker line for a crashed server, else "".
func (e *DiedError) Mark() string {
	if !e.Crashed {
		return ""
	}
	return fmt.Sprintf("%s %s (pid %d) %s", CrashMarker, e.Service, e.Pid, e.How)
}

// LogTails is the tail of the server's logs (its last error lines first), for a test that
// failed while the server ran: what it said about a client it refused.
func (s *service) LogTails() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return tails(s.logs())
}

// Stop stops the server (SIGTERM, then SIGKILL after stopGrace) and keeps its data, so that
// Restart brings it back on the same ports. Stopping a stopped server does nothing. The error
// reports a server that had crashed before Stop.
func (s *service) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopLocked()
}

func (s *service) stopLocked() error {
	if s.proc == nil {
		return nil
	}
	p := s.proc
	s.proc = nil
	if err := s.died(p); err != nil {
		return err
	}
	if err := p.terminate(s.log, stopGrace); err != nil {
		return fmt.Errorf("stopping %s: %w%s", s.name, err, tails(s.logs()))
	}
	return nil
}

// restart stops the server if it runs and starts it again with start (called with mu held),
// logging attrs beside the new pid. Clients see an outage in between, as with a real restart.
func (s *service) restart(ctx context.Context, start func(context.Context) error, attrs ...any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("restarting %s: already closed", s.name)
	}
	if err := s.stopLocked(); err != nil {
		s.log.Warn(s.name+" had crashed before Restart", "err", err)
	}
	began := time.Now()
	if err := start(ctx); err != nil {
		return fmt.Errorf("restarting: %w", err)
	}
	s.log.Info(s.name+" restarted", append(attrs, "pid", s.proc.pid(), "took", time.Since(began).Round(time.Millisecond))...)
	return nil
}

// Close stops the server and removes its directory, unless it is to be kept. Closing twice
// does nothing.
func (s *service) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.stopLocked()
	if s.keepDir {
		s.log.Info(s.name+"'s directory kept", "dir", s.dir)
		return err
	}
	if rerr := os.RemoveAll(s.dir); rerr != nil {
		err = errors.Join(err, fmt.Errorf("removing %s's directory: %w", s.name, rerr))
	}
	return err
}
