// Package chconn opens native-protocol connections to ClickHouse.
//
// ClickHouse 18.16 (the server Debian ships and our tests use) speaks only the native protocol
// to clickhouse-go/v2 (HTTP fails there), so DSNs are clickhouse://host:port/database.
package chconn

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

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
	return open(ctx, opts)
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
	conn, err := open(ctx, opts)
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
	opts, err := clickhouse.ParseDSN(dsn)
	if err != nil {
		if _, perr := url.Parse(dsn); perr != nil {
			// The URL error would quote the piece that does not parse, often the password.
			return nil, usage.Errorf("clickhouse DSN %s does not parse as a URL (details hidden: they may quote the password): "+
				"percent-encode '%%', '@', ':', '/', '?' and '#' in the user name and password ('%%' as %%25)", Redact(dsn))
		}
		return nil, usage.Errorf("parse clickhouse DSN %s: %s", Redact(dsn), scrub(err.Error(), dsn))
	}
	if opts.Protocol != clickhouse.Native {
		return nil, usage.Errorf("clickhouse DSN %s: only the native protocol (clickhouse://host:port/db) is supported", Redact(dsn))
	}
	if len(opts.Addr) == 0 {
		return nil, usage.Errorf("clickhouse DSN %s: no host:port", Redact(dsn))
	}
	if opts.DialTimeout == 0 {
		opts.DialTimeout = 5 * time.Second
	}
	return opts, nil
}

func open(ctx context.Context, opts *clickhouse.Options) (driver.Conn, error) {
	conn, err := clickhouse.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("open clickhouse %s: %w", addrs(opts), err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, DefaultPingTimeout)
	defer cancel()
	if err := conn.Ping(pingCtx); err != nil {
		conn.Close()
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
