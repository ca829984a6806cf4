// Package redact hides the secrets of a connection string in what is logged or returned as an
// error. It is apart from chconn so that what only prints a DSN (the start-up line of every
// service, the exporter's included) does not link the ClickHouse driver.
package redact

import (
	"net/url"
	"strings"
)

// Hidden replaces a secret in what we print.
const Hidden = "xxxxx"

// DSN returns dsn fit for a log line or an error: the password of the user info, the
// password query parameter and the credentials of an http_proxy parameter are hidden. A DSN
// that does not parse as a URL is shown as its scheme only, since nothing tells where its
// password ends (an unencoded '@', '/', '?' or '#' can sit in it); nor does one without
// "scheme://".
func DSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.Opaque != "" { // "u:pw@host" parses as scheme u, opaque pw@host
		return unparsed(dsn)
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), Hidden)
		}
	}
	if u.RawQuery != "" {
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil {
			u.RawQuery = Hidden
		} else {
			for key, values := range q {
				for i, v := range values {
					q[key][i] = redactParam(key, v)
				}
			}
			u.RawQuery = q.Encode()
		}
	}
	return u.String()
}

// redactParam hides the value of a DSN parameter that holds a secret.
func redactParam(key, value string) string {
	switch strings.ToLower(key) {
	case "password":
		return Hidden
	case "http_proxy":
		p, err := url.Parse(value)
		if err != nil {
			return Hidden
		}
		if p.User != nil {
			p.User = url.User(Hidden)
		}
		return p.String()
	}
	return value
}

// unparsed shows what can safely be said of a DSN that does not parse: its scheme.
func unparsed(dsn string) string {
	if i := strings.Index(dsn, "://"); i > 0 && !strings.ContainsAny(dsn[:i], ":@/?#%") {
		return dsn[:i] + "://" + Hidden
	}
	return Hidden
}

// secrets lists the passwords dsn carries, as written and decoded, for scrubbing a message
// that may quote them (an error of the driver).
func secrets(dsn string) []string {
	var s []string
	add := func(v string) {
		if len(v) > 0 {
			s = append(s, v)
		}
	}
	if u, err := url.Parse(dsn); err == nil {
		if u.User != nil {
			p, _ := u.User.Password()
			add(p)
		}
		if q, err := url.ParseQuery(u.RawQuery); err == nil {
			for _, v := range q["password"] {
				add(v)
			}
		}
	}
	rest := dsn
	if i := strings.Index(rest, "://"); i >= 0 {
		rest = rest[i+3:]
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		if colon := strings.Index(rest[:at], ":"); colon >= 0 {
			add(rest[colon+1 : at])
		}
	}
	return s
}

// Scrub replaces every password of dsn in msg.
func Scrub(msg, dsn string) string {
	for _, s := range secrets(dsn) {
		msg = strings.ReplaceAll(msg, s, Hidden)
	}
	return msg
}
