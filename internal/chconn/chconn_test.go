package chconn_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/internal/chconn"
)

func TestMain(m *testing.M) { localtest.Main(m) }

func TestOpenAndEnsureDatabase(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// The server only: this test creates the database itself.
	dsn := localtest.ClickHouse(t).DSN("chconn_test")
	if _, err := chconn.Open(ctx, dsn); err == nil {
		t.Fatal("Open of a database that does not exist succeeded")
	}
	for range 2 { // idempotent
		if err := chconn.EnsureDatabase(ctx, dsn); err != nil {
			t.Fatalf("EnsureDatabase: %v", err)
		}
	}
	conn, err := chconn.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer conn.Close()
	var db string
	if err := conn.QueryRow(ctx, "SELECT currentDatabase()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	if db != "chconn_test" {
		t.Errorf("current database %q", db)
	}
}

// TestOpenUnreachable checks that a server that refuses connections, and one that accepts but
// never answers, are both reported promptly with the address.
func TestOpenUnreachable(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() { // accept and hold connections without ever answering
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()

	for _, tc := range []struct{ name, addr, dsnSuffix string }{
		{"refused", closedAddr, ""},
		{"silent", silent.Addr().String(), "?dial_timeout=500ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := chconn.Open(context.Background(), "clickhouse://"+tc.addr+"/default"+tc.dsnSuffix)
			took := time.Since(start)
			if err == nil {
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tc.addr) {
				t.Errorf("error does not name %s: %v", tc.addr, err)
			}
			if took > chconn.DefaultPingTimeout+time.Second {
				t.Errorf("took %s", took)
			}
			t.Logf("%s after %s", err, took.Round(time.Millisecond))
		})
	}
}

func TestOpenBadDSN(t *testing.T) {
	for _, dsn := range []string{"http://127.0.0.1:8123/db", "clickhouse://127.0.0.1:9000/db?dial_timeout=soon"} {
		if _, err := chconn.Open(context.Background(), dsn); err == nil {
			t.Errorf("Open(%q) succeeded", dsn)
		}
	}
	if err := chconn.EnsureDatabase(context.Background(), "clickhouse://127.0.0.1:1/bad-name"); err == nil || !strings.Contains(err.Error(), "bad-name") {
		t.Errorf("EnsureDatabase with a bad name: %v", err)
	}
}
