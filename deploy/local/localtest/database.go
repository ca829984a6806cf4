package localtest

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/deploy/local"
	"github.com/slicemeter/slicemeter/internal/chconn"
	"github.com/slicemeter/slicemeter/internal/redact"
	"github.com/slicemeter/slicemeter/schemas/migrations"
)

// databaseTimeout bounds creating and migrating a database.
const databaseTimeout = time.Minute

// DatabaseOptions configures Database; the zero value is a migrated database named after the
// test on the shared ClickHouse.
type DatabaseOptions struct {
	// Server holds the database; nil means the shared ClickHouse(t).
	Server *local.ClickHouse
	// Name is the database's name; "" means DatabaseName(t).
	Name string
	// Logger receives the returned connection's driver log; nil: none. The migrations run
	// through another connection, so it sees only the test's own queries.
	Logger *slog.Logger
	// Unmigrated leaves the database empty: for a test that runs `slicemeter migrate` itself.
	Unmigrated bool
}

// DB is a database of one test, with slicemeter's schema unless DatabaseOptions.Unmigrated.
type DB struct {
	Name   string
	DSN    string      // for the slicemeter binary's --clickhouse.dsn
	Conn   driver.Conn // closed when the test ends
	Server *local.ClickHouse
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Database is a fresh database on the shared ClickHouse (or opts.Server), named after t unless
// opts names it, with every migration applied unless opts.Unmigrated. Fresh: a database of that
// name left by an earlier run (-count) is dropped first.
func Database(t testing.TB, opts DatabaseOptions) *DB {
	t.Helper()
	ch := opts.Server
	if ch == nil {
		ch = ClickHouse(t)
	}
	name := opts.Name
	if name == "" {
		name = DatabaseName(t)
	}
	if !identifier.MatchString(name) {
		t.Fatalf("database name %q: only letters, digits and '_'", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), databaseTimeout)
	defer cancel()
	db := &DB{Name: name, DSN: ch.DSN(name), Server: ch}
	// A server that died under an earlier test fails every later one: say why, once per test,
	// instead of "connection refused".
	if err := ch.Died(); err != nil {
		t.Fatalf("the ClickHouse server under the tests is gone: %v%s", err, crashMark(err))
	}
	t.Cleanup(func() {
		if err := ch.Died(); err != nil && !t.Failed() {
			t.Errorf("the ClickHouse server died during the test: %v%s", err, crashMark(err))
		} else if err != nil {
			t.Logf("the ClickHouse server died during the test: %v%s", err, crashMark(err))
		}
	})
	if err := recreate(ctx, ch, name); err != nil {
		t.Fatal(err)
	}
	if !opts.Unmigrated {
		if err := migrate(ctx, db.DSN); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := open(ctx, db.DSN, opts.Logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	db.Conn = conn
	return db
}

// recreate drops database name if it exists and creates it empty.
func recreate(ctx context.Context, ch *local.ClickHouse, name string) error {
	conn, err := chconn.Open(ctx, ch.DSN("default"))
	if err != nil {
		return fmt.Errorf("connecting to ClickHouse to create database %s: %w", name, err)
	}
	defer conn.Close()
	for _, q := range []string{"DROP DATABASE IF EXISTS " + name, "CREATE DATABASE " + name} {
		if err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("creating a fresh database %s: %s: %w", name, q, err)
		}
	}
	return nil
}

func migrate(ctx context.Context, dsn string) error {
	conn, err := chconn.Open(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connecting to migrate %s: %w", redact.DSN(dsn), err)
	}
	defer conn.Close()
	if _, err := migrations.Apply(ctx, conn); err != nil {
		return fmt.Errorf("migrating %s: %w", redact.DSN(dsn), err)
	}
	return nil
}

// open connects as slicemeter does (chconn), or with logger as the driver's logger.
func open(ctx context.Context, dsn string, logger *slog.Logger) (driver.Conn, error) {
	if logger == nil {
		return chconn.Open(ctx, dsn)
	}
	o, err := clickhouse.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("parsing DSN %s: %w", redact.DSN(dsn), err)
	}
	o.Logger = logger
	conn, err := clickhouse.Open(o)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", redact.DSN(dsn), err)
	}
	if err := conn.Ping(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("connecting to %s: %w", redact.DSN(dsn), err)
	}
	return conn, nil
}
