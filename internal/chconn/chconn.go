// Package chconn opens native-protocol connections to ClickHouse.
//
// ClickHouse 18.16 (the server Debian ships and our tests use) speaks only the native protocol
// to clickhouse-go/v2 (HTTP fails there), so DSNs are clickhouse://host:port/database.
package chconn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/slicemeter/slicemeter/internal/redact"
	"github.com/slicemeter/slicemeter/internal/usage"
)

// DefaultPingTimeout bounds how long Open waits for the server to answer, so that an
// unreachable server is reported promptly instead of after the driver's 30 s default.
const DefaultPingTimeout = 10 * time.Second

// Open connects to the ClickHouse server named by dsn (clickhouse://host:port/database) and
// checks that it answers within DefaultPingTimeout (or the ctx deadline, if sooner).
func Open(ctx context.Context, dsn string) (driver.Conn, error) {
	opts, err := parseOptions(dsn)
	if err != nil {
		return nil, err
	}
	return open(ctx, opts, opts.Auth.Database)
}

// EnsureDatabase creates the database named in dsn if it does not exist. It connects to the
// database "default" of the same server, since the DSN's own database may not exist yet.
func EnsureDatabase(ctx context.Context, dsn string) error {
	opts, err := parseOptions(dsn)
	if err != nil {
		return err
	}
	database := opts.Auth.Database
	if database == "" || database == "default" {
		return nil
	}
	if !validIdentifier(database) {
		return fmt.Errorf("clickhouse database name %q in DSN: only letters, digits and '_' are allowed", database)
	}
	opts.Auth.Database = "default"
	conn, err := open(ctx, opts, database)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.Exec(ctx, "CREATE DATABASE IF NOT EXISTS "+database); err != nil {
		return fmt.Errorf("create clickhouse database %s on %s: %w", database, addrs(opts), err)
	}
	return nil
}

// parseOptions parses dsn and fills in the timeouts we rely on. Its errors are usage errors
// and never quote the password, not even of a DSN that does not parse.
func parseOptions(dsn string) (*clickhouse.Options, error) {
	if !strings.Contains(dsn, "://") {
		return nil, noScheme(dsn)
	}
	opts, err := clickhouse.ParseDSN(dsn)
	if err != nil {
		if _, perr := url.Parse(dsn); perr != nil {
			// The URL error would quote the piece that does not parse, often the password.
			return nil, usage.Errorf("clickhouse DSN %s does not parse as a URL (details hidden: they may quote the password): "+
				"percent-encode '%%', '@', ':', '/', '?' and '#' in the user name and password ('%%' as %%25)", redact.DSN(dsn))
		}
		return nil, usage.Errorf("parse clickhouse DSN %s: %s", redact.DSN(dsn), redact.Scrub(err.Error(), dsn))
	}
	if opts.Protocol != clickhouse.Native {
		return nil, usage.Errorf("clickhouse DSN %s: only the native protocol (clickhouse://host:port/db) is supported", redact.DSN(dsn))
	}
	if len(opts.Addr) == 0 {
		return nil, usage.Errorf("clickhouse DSN %s: no host:port", redact.DSN(dsn))
	}
	if opts.DialTimeout == 0 {
		opts.DialTimeout = 5 * time.Second
	}
	return opts, nil
}

// open connects with opts; database is the DSN's, for the hint of a DSN on the HTTP port.
func open(ctx context.Context, opts *clickhouse.Options, database string) (driver.Conn, error) {
	conn, err := clickhouse.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("open clickhouse %s: %w", addrs(opts), err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, DefaultPingTimeout)
	defer cancel()
	if err := conn.Ping(pingCtx); err != nil {
		conn.Close()
		if addr, ok := httpPort(ctx, opts, err); ok {
			return nil, usage.Errorf("connect to clickhouse %s: that is ClickHouse's HTTP port (usually 8123; the native handshake failed: %v); "+
				"slicemeter speaks ClickHouse's native protocol, usually on port 9000 (the server's <tcp_port>): expected a DSN such as %s",
				addr, err, nativeDSN(opts, database))
		}
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return nil, fmt.Errorf("clickhouse %s did not answer within %s: %w", addrs(opts), DefaultPingTimeout, err)
		}
		return nil, fmt.Errorf("connect to clickhouse %s (database %q): %w", addrs(opts), opts.Auth.Database, err)
	}
	return conn, nil
}

func addrs(opts *clickhouse.Options) string { return strings.Join(opts.Addr, ",") }

// validIdentifier reports whether name can be used unquoted in a CREATE DATABASE statement.
func validIdentifier(name string) bool {
	for i, r := range name {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return name != ""
}

// DSNForm is the form of a DSN, for the messages that refuse one.
const DSNForm = "clickhouse://[user[:password]@]host:port/database, e.g. clickhouse://127.0.0.1:9000/default (the native protocol; http:// is not supported)"

// noScheme refuses a DSN without a scheme ("127.0.0.1:9000/db"), which would otherwise fail
// to parse as a URL and get the hint about percent-encoding a password. It shows the DSN
// with the scheme added only where it can hold no password (no '@', no password parameter).
func noScheme(dsn string) error {
	if strings.Contains(dsn, "@") || strings.Contains(strings.ToLower(dsn), "password") {
		return usage.Errorf("clickhouse DSN %s has no scheme: expected %s", redact.Hidden, DSNForm)
	}
	return usage.Errorf("clickhouse DSN %q has no scheme: expected %s; did you mean clickhouse://%s?", dsn, DSNForm, dsn)
}

// httpPort says whether a handshake failed because the address is ClickHouse's HTTP port, and
// which address it is. A recent server answers the native protocol's hello with "HTTP/1.1 …",
// whose first byte 'H' (72) the driver reads as an unknown packet ("[handshake] unexpected
// packet [72] from server"); an older one (18.16) waits for a request line until the read
// times out. Either way a failed handshake is followed by one GET /ping, which ClickHouse's
// HTTP interface answers "Ok.".
func httpPort(ctx context.Context, opts *clickhouse.Options, err error) (string, bool) {
	if !strings.Contains(err.Error(), "handshake") || opts.TLS != nil {
		return "", false
	}
	for _, addr := range opts.Addr {
		if strings.Contains(err.Error(), "[handshake] unexpected packet [72]") && len(opts.Addr) == 1 {
			return addr, true
		}
		if pingsOverHTTP(ctx, addr) {
			return addr, true
		}
	}
	return "", false
}

// httpProbeTimeout bounds the GET /ping of httpPort.
const httpProbeTimeout = 2 * time.Second

// pingsOverHTTP says whether addr answers GET /ping as ClickHouse's HTTP interface does.
func pingsOverHTTP(ctx context.Context, addr string) bool {
	ctx, cancel := context.WithTimeout(ctx, httpProbeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/ping", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16))
	return err == nil && resp.StatusCode == http.StatusOK && strings.HasPrefix(string(body), "Ok.")
}

// nativeDSN is the DSN of opts' first server and database db on the native protocol's usual
// port, without the user and password: what a DSN that reached the HTTP port likely meant.
func nativeDSN(opts *clickhouse.Options, db string) string {
	host := "host"
	if len(opts.Addr) > 0 {
		if h, _, err := net.SplitHostPort(opts.Addr[0]); err == nil && h != "" {
			host = h
		}
	}
	if db == "" {
		db = "default"
	}
	return "clickhouse://" + net.JoinHostPort(host, "9000") + "/" + db
}
