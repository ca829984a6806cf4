// Package startuplog writes the line a service logs once at start: its build and the
// effective value of every flag of its command, secrets masked.
package startuplog

import (
	"context"
	"log/slog"
	"net/url"
	"strings"

	"github.com/prometheus/common/version"

	"github.com/slicemeter/slicemeter/internal/redact"
)

// Flag is one flag of the command and its effective value: given, from its SLICEMETER_*
// variable, or the default.
type Flag struct{ Name, Value string }

// Log logs one line for service: the build and the effective value of every flag, so that an
// operator reads from the log what a process runs with instead of reconstructing it from the
// Deployment, the environment and the defaults of this version. Secrets are masked (Value).
func Log(logger *slog.Logger, service string, flags []Flag) {
	attrs := make([]slog.Attr, 0, len(flags))
	for _, f := range flags {
		attrs = append(attrs, slog.String(f.Name, Value(f.Name, f.Value)))
	}
	logger.LogAttrs(context.Background(), slog.LevelInfo, "starting slicemeter "+service,
		slog.String("version", version.Version), slog.String("revision", version.GetRevision()),
		slog.Attr{Key: "config", Value: slog.GroupValue(attrs...)})
}

// masked stands in for a secret.
const masked = "xxxxx"

// Value is value of flag as the start-up line shows it: a DSN with its password (user
// info or parameter) masked, any URL's password masked, and the value of a flag named after a
// secret (password, token, secret; not a -file flag, which names where the secret is) masked
// whole.
func Value(flag, value string) string {
	if value == "" {
		return value
	}
	name := strings.ToLower(flag)
	if !strings.HasSuffix(name, "-file") && !strings.HasSuffix(name, "-dir") &&
		(strings.Contains(name, "password") || strings.Contains(name, "token") || strings.Contains(name, "secret")) {
		return masked
	}
	if strings.Contains(name, "dsn") {
		return redact.DSN(value)
	}
	if strings.Contains(value, "://") {
		// A list of URLs (brokers, endpoints) or one URL: mask each one's password.
		parts := strings.Split(value, ",")
		for i, p := range parts {
			if u, err := url.Parse(strings.TrimSpace(p)); err == nil && u.User != nil {
				if _, ok := u.User.Password(); ok {
					u.User = url.UserPassword(u.User.Username(), masked)
					parts[i] = u.String()
				}
			} else if err != nil && strings.Contains(p, "@") {
				parts[i] = masked // unparsable with user info: nothing tells where a password ends
			}
		}
		return strings.Join(parts, ",")
	}
	return value
}
