package localtest_test

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slicemeter/slicemeter/deploy/local"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

func TestMain(m *testing.M) { localtest.Main(m) }

func TestDatabaseName(t *testing.T) {
	for name, want := range map[string]string{
		"Plain":                "testdatabasename_plain",
		"with spaces/and-dash": "testdatabasename_with_spaces_and_dash",
	} {
		t.Run(name, func(t *testing.T) {
			if got := localtest.DatabaseName(t); got != want {
				t.Errorf("DatabaseName = %q, want %q", got, want)
			}
		})
	}
}

// A database is migrated, and fresh on every call: what a test left in it is gone.
func TestDatabase(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for run := range 2 {
		db := localtest.Database(t, localtest.DatabaseOptions{})
		var migrated, leftOver uint64
		err := db.Conn.QueryRow(ctx, `SELECT countIf(name = 'allocations'), countIf(name = 'left_over')
			FROM system.tables WHERE database = currentDatabase()`).Scan(&migrated, &leftOver)
		if err != nil {
			t.Fatal(err)
		}
		if migrated != 1 || leftOver != 0 {
			t.Fatalf("run %d: allocations table %d, left-over table %d; want 1 and 0", run, migrated, leftOver)
		}
		if err := db.Conn.Exec(ctx, "CREATE TABLE left_over (x UInt8) ENGINE = Memory"); err != nil {
			t.Fatal(err)
		}
	}
	if db := localtest.Database(t, localtest.DatabaseOptions{Name: "unmigrated", Unmigrated: true}); db.Name != "unmigrated" {
		t.Errorf("name %q", db.Name)
	} else {
		var tables uint64
		if err := db.Conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = currentDatabase()").Scan(&tables); err != nil || tables != 0 {
			t.Errorf("an unmigrated database has %d tables (%v)", tables, err)
		}
	}
}

// The fake Kafka has slicemeter's topics.
func TestFakeKafka(t *testing.T) {
	ctx := context.Background()
	brokers := localtest.FakeKafka(t)
	w := kafkaconn.Cluster{Brokers: brokers}.NewWriter(pb.TopicSamples, nil)
	defer w.Close()
	if err := w.WriteMessages(ctx, kafka.Message{Key: []byte("k"), Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
}

// One broker per test binary: a second call is the same broker.
func TestKafka(t *testing.T) {
	a, b := localtest.Kafka(t), localtest.Kafka(t)
	if a != b {
		t.Errorf("two brokers: %s and %s", a.Brokers(), b.Brokers())
	}
}

// recordingTB is a testing.TB whose failures and cleanups are recorded, to check what the
// fixtures do to a test; a method it does not define panics.
type recordingTB struct {
	testing.TB
	name     string
	cleanups []func()
	errors   []string
}

func (r *recordingTB) Helper()                   {}
func (r *recordingTB) Name() string              { return r.name }
func (r *recordingTB) Cleanup(f func())          { r.cleanups = append(r.cleanups, f) }
func (r *recordingTB) Failed() bool              { return len(r.errors) > 0 }
func (r *recordingTB) Logf(string, ...any)       {}
func (r *recordingTB) Errorf(f string, a ...any) { r.errors = append(r.errors, fmt.Sprintf(f, a...)) }
func (r *recordingTB) cleanup() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// A test's own ClickHouse that crashes fails the test with the crash mark (make test runs it
// again); one the test killed itself does not.
func TestNewClickHouseCrash(t *testing.T) {
	localtest.SkipShort(t, "ClickHouse")
	for _, tc := range []struct {
		name   string
		signal syscall.Signal
		fails  bool
	}{
		{"segfault", syscall.SIGSEGV, true},
		{"killed by the test", syscall.SIGKILL, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recordingTB{name: t.Name()}
			ch := localtest.NewClickHouse(rec)
			if err := syscall.Kill(ch.Pid(), tc.signal); err != nil {
				t.Fatal(err)
			}
			// ClickHouse logs a crash's stack and sleeps about 10 s before it dies.
			for deadline := time.Now().Add(time.Minute); ch.Died() == nil; time.Sleep(100 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the server did not die")
				}
			}
			rec.cleanup()
			if got := len(rec.errors) > 0; got != tc.fails {
				t.Fatalf("test failed: %v, want %v: %q", got, tc.fails, rec.errors)
			}
			if tc.fails && !strings.Contains(rec.errors[0], local.CrashMarker) {
				t.Errorf("the failure lacks the crash mark:\n%s", rec.errors[0])
			}
		})
	}
}
