// Package localtest gives tests the real services of package local as fixtures: one ClickHouse
// server and one Kafka broker per test binary, started by the first test that needs them and
// stopped by Main, a fresh migrated database per test, and an in-process fake Kafka (kfake).
//
// Every fixture that starts a server skips its test under `go test -short`, so that -short
// starts no service at all. A test binary that uses the shared servers calls Main from its
// TestMain:
//
//	func TestMain(m *testing.M) { localtest.Main(m) }
package localtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local"
)

// startTimeout bounds a shared server's start-up; Kafka's first start on a machine fetches
// its jars, hence the margin.
const startTimeout = 3 * time.Minute

// shared is a server started once per test binary by the first test that asks for it. A
// failed start is remembered: every later test fails with the same error instead of trying
// again.
type shared[T interface{ Close() error }] struct {
	once sync.Once
	srv  T
	err  error
	ok   bool
}

func (s *shared[T]) get(start func(context.Context) (T, error)) (T, error) {
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		s.srv, s.err = start(ctx)
		s.ok = s.err == nil
	})
	return s.srv, s.err
}

// close stops the server. Its error is a server that died while the tests ran (a crash, the
// OOM killer), with the tail of its logs: the only account of why the tests after it failed.
func (s *shared[T]) close() error {
	if s.ok {
		return s.srv.Close()
	}
	return nil
}

// The test binary's servers. Main stops them.
var (
	sharedClickHouse shared[*local.ClickHouse]
	sharedKafka      shared[*local.Kafka]
)

// Main runs the tests and stops the servers they started, then exits with the tests' status.
// Call it from TestMain.
func Main(m *testing.M) {
	os.Exit(Run(m))
}

// Run is Main for a TestMain with more to do after the tests: it returns the status instead
// of exiting.
func Run(m *testing.M) int {
	code := m.Run()
	for _, err := range []error{sharedClickHouse.close(), sharedKafka.close()} {
		if err != nil {
			fmt.Fprintf(os.Stderr, "localtest: the shared server died during the tests: %v%s\n", err, crashMark(err))
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// crashMark is a line of its own, local.CrashMarker and how, when err is a server that
// crashed: `make test` runs the failed tests of a package whose output has it once more.
func crashMark(err error) string {
	var died *local.DiedError
	if !errors.As(err, &died) || !died.Crashed {
		return ""
	}
	return "\n" + died.Mark()
}

// SkipShort skips t under -short: it needs what, a service that -short never starts.
func SkipShort(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("-short: not starting %s", what)
	}
}

// ClickHouse is the test binary's ClickHouse 18.16 server, started on first use. Tests share
// it: each works in its own database (see Database).
func ClickHouse(t testing.TB) *local.ClickHouse {
	t.Helper()
	SkipShort(t, "ClickHouse")
	ch, err := sharedClickHouse.get(func(ctx context.Context) (*local.ClickHouse, error) {
		return local.StartClickHouse(ctx, local.ClickHouseOptions{})
	})
	if err != nil {
		t.Fatalf("starting the shared ClickHouse (is clickhouse-server installed? see deploy/local/install-deps.sh): %v", err)
	}
	return ch
}

// NewClickHouse is a ClickHouse server of t's own, closed when t ends: for a test that stops
// or restarts its server, which would disturb the others on the shared one.
func NewClickHouse(t testing.TB) *local.ClickHouse {
	t.Helper()
	SkipShort(t, "ClickHouse")
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	ch, err := local.StartClickHouse(ctx, local.ClickHouseOptions{})
	if err != nil {
		t.Fatalf("starting a ClickHouse server: %v", err)
	}
	t.Cleanup(func() {
		// A server the test killed or stopped itself is its business; one that crashed is not.
		err := ch.Close()
		if mark := crashMark(err); mark != "" {
			t.Errorf("the test's ClickHouse server crashed: %v%s", err, mark)
		}
	})
	return ch
}

// Kafka is the test binary's Kafka broker, started on first use. Tests share it, so a test
// on it must not depend on a topic being empty (use NewKafka, or topics of its own).
func Kafka(t testing.TB) *local.Kafka {
	t.Helper()
	SkipShort(t, "Kafka")
	k, err := sharedKafka.get(func(ctx context.Context) (*local.Kafka, error) {
		return local.StartKafka(ctx, local.KafkaOptions{})
	})
	if err != nil {
		t.Fatalf("starting the shared Kafka broker (java and maven, see deploy/local/install-deps.sh): %v", err)
	}
	return k
}

// NewKafka is a Kafka broker of t's own, closed when t ends: for a test that stops or
// restarts the broker, or needs topics that hold nothing but its own messages.
func NewKafka(t testing.TB) *local.Kafka {
	t.Helper()
	SkipShort(t, "Kafka")
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	k, err := local.StartKafka(ctx, local.KafkaOptions{})
	if err != nil {
		t.Fatalf("starting a Kafka broker: %v", err)
	}
	t.Cleanup(func() { _ = k.Close() })
	// Before Close (cleanups run last first): a broker that died says how, and a test that
	// failed against a live one gets its log's tail, instead of a bare "connection refused".
	t.Cleanup(func() {
		switch err := k.Died(); {
		case err != nil && !t.Failed():
			t.Errorf("the Kafka broker died during the test: %v%s", err, crashMark(err))
		case err != nil:
			t.Logf("the Kafka broker died during the test: %v%s", err, crashMark(err))
		case t.Failed():
			t.Logf("the Kafka broker (pid %d, %s) is running; its logs:%s", k.Pid(), k.Brokers(), k.LogTails())
		}
	})
	return k
}

var notIdent = regexp.MustCompile(`[^a-z0-9]+`)

// DatabaseName is the database name Database gives t: its name, lower case, with every run
// of other characters than letters and digits replaced by '_' (ClickHouse's identifiers, and
// what chconn accepts in a DSN).
func DatabaseName(t testing.TB) string {
	name := strings.Trim(notIdent.ReplaceAllString(strings.ToLower(t.Name()), "_"), "_")
	if name == "" || name[0] >= '0' && name[0] <= '9' {
		name = "t_" + name
	}
	return name
}

// NewCluster is a ClickHouse cluster of t's own (a ZooKeeper and opts.Shards servers), closed
// when t ends.
func NewCluster(t testing.TB, opts local.ClusterOptions) *local.Cluster {
	t.Helper()
	SkipShort(t, "ZooKeeper and a ClickHouse cluster")
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c, err := local.StartCluster(ctx, opts)
	if err != nil {
		t.Fatalf("starting a ClickHouse cluster: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}
