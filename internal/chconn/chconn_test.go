package chconn_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/internal/chconn"
	"github.com/slicemeter/slicemeter/internal/usage"
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

// A DSN on a real ClickHouse's HTTP port fails the native handshake ("[handshake] unexpected
// packet [72]", 'H' of "HTTP/1.1", on a recent server; a read timeout on 18.16): the error
// says it is the HTTP port and which DSN to use, and is a usage error (exit 2). A DSN without a scheme says so and shows the form, instead of
// the hint about percent-encoding a password.
func TestOpenNamesHTTPPortAndMissingScheme(t *testing.T) {
	addr := localtest.ClickHouse(t).HTTPAddr()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := chconn.Open(ctx, "clickhouse://"+addr+"/metering")
	if err == nil || !usage.Is(err) || !strings.Contains(err.Error(), "127.0.0.1:"+strings.Split(addr, ":")[1]+": that is ClickHouse's HTTP port") ||
		!strings.Contains(err.Error(), "clickhouse://127.0.0.1:9000/metering") {
		t.Errorf("Open on an HTTP port: %v; want a usage error naming the HTTP port and clickhouse://127.0.0.1:9000/metering", err)
	}
	for dsn, want := range map[string]string{
		"127.0.0.1:9000/metering":                `"127.0.0.1:9000/metering" has no scheme: expected clickhouse://[user[:password]@]host:port/database`,
		"localhost:9000":                         "did you mean clickhouse://localhost:9000?",
		"meter:s3cr%t@127.0.0.1:9000/metering":   "clickhouse DSN xxxxx has no scheme",
		"127.0.0.1:9000/metering?password=s3cr3": "clickhouse DSN xxxxx has no scheme",
	} {
		_, err := chconn.Open(ctx, dsn)
		if err == nil || !usage.Is(err) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "s3cr") ||
			strings.Contains(err.Error(), "percent-encode") {
			t.Errorf("Open(%q): %v; want a usage error naming %q, no password, no percent-encoding hint", dsn, err, want)
		}
	}
}
