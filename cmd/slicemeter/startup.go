package main

import (
	"context"
	"log/slog"
	"net/url"
	"strings"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/version"

	"github.com/slicemeter/slicemeter/internal/chconn"
)

// services are the long-running commands: each logs its configuration once at start.
var services = map[string]bool{"exporter": true, "collector": true, "attribution": true}

// logStartup logs, for a service, one line with the build and the effective value of every
// flag of the command (given, from its SLICEMETER_* variable, or the default), so that an
// operator reads from the log what a process runs with instead of reconstructing it from
// the Deployment, the environment and the defaults of this version. Secrets are masked
// (configValue).
func logStartup(logger *slog.Logger, app *kingpin.Application, selected string) {
	if !services[selected] {
		return
	}
	model := app.Model()
	var attrs []slog.Attr
	add := func(flags []*kingpin.FlagModel) {
		for _, f := range flags {
			if f.Hidden || f.Value == nil || skipFlags[f.Name] {
				continue
			}
			attrs = append(attrs, slog.String(f.Name, configValue(f.Name, f.Value.String())))
		}
	}
	add(model.Flags)
	for _, c := range model.Commands {
		if c.FullCommand == selected {
			add(c.Flags)
		}
	}
	logger.LogAttrs(context.Background(), slog.LevelInfo, "starting slicemeter "+selected,
		slog.String("version", version.Version), slog.String("revision", version.GetRevision()),
		slog.Attr{Key: "config", Value: slog.GroupValue(attrs...)})
}

// skipFlags are kingpin's own flags, not configuration.
var skipFlags = map[string]bool{"help": true, "help-long": true, "help-man": true, "version": true,
	"completion-bash": true, "completion-script-bash": true, "completion-script-zsh": true}

// masked stands in for a secret.
const masked = "xxxxx"

// configValue is value of flag as the start-up line shows it: a DSN with its password (user
// info or parameter) masked, any URL's password masked, and the value of a flag named after a
// secret (password, token, secret; not a -file flag, which names where the secret is) masked
// whole.
func configValue(flag, value string) string {
	if value == "" {
		return value
	}
	name := strings.ToLower(flag)
	if !strings.HasSuffix(name, "-file") && !strings.HasSuffix(name, "-dir") &&
		(strings.Contains(name, "password") || strings.Contains(name, "token") || strings.Contains(name, "secret")) {
		return masked
	}
	if strings.Contains(name, "dsn") {
		return chconn.Redact(value)
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
