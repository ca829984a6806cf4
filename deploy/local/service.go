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
	if dead, why := s.proc.exited(); dead {
		return fmt.Errorf("%s (pid %d) exited on its own (%s; %s)%s", s.name, s.proc.pid(), why, machineState(s.dir), tails(s.logs()))
	}
	return nil
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
