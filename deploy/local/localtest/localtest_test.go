package localtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

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
