package chconn_test

import (
	"context"
	"strings"
	"testing"

	"github.com/slicemeter/slicemeter/internal/chconn"
	"github.com/slicemeter/slicemeter/internal/redact"
	"github.com/slicemeter/slicemeter/internal/usage"
)

// TestBadDSNsNeverQuoteThePassword feeds DSNs that fail to parse or are refused to Open and
// EnsureDatabase, and checks that no error quotes the password, nor any 3-character piece of
// it (a URL error quotes the bad escape, e.g. "%zz").
func TestBadDSNsNeverQuoteThePassword(t *testing.T) {
	tests := []struct {
		name, dsn, password string
		refused             bool // parses, and the connection is refused (not a usage error)
	}{
		{"unencoded percent", "clickhouse://u:p%zzSecret@127.0.0.1:1/db", "p%zzSecret", false},
		{"unencoded percent at the end", "clickhouse://u:Secret%@127.0.0.1:1/db", "Secret%", false},
		{"unencoded slash", "clickhouse://u:se/cretPW@127.0.0.1:1/db", "se/cretPW", false},
		{"unencoded question mark", "clickhouse://u:pa?ssWORD@127.0.0.1:1/db", "pa?ssWORD", false},
		{"unencoded hash", "clickhouse://u:pa#ssWORD@127.0.0.1:1/db", "pa#ssWORD", false},
		{"unencoded at", "clickhouse://u:pa@ssWORD@127.0.0.1:1/db", "pa@ssWORD", true},
		{"space in host", "clickhouse://u:hunter22@127.0.0. 1:1/db", "hunter22", false},
		{"bad port", "clickhouse://u:hunter22@127.0.0.1:x/db", "hunter22", false},
		{"password parameter with bad escape", "clickhouse://127.0.0.1:1/db?password=qq%zzTop", "qq%zzTop", true},
		{"password parameter and bad setting", "clickhouse://127.0.0.1:1/db?password=TopSecret&dial_timeout=soon", "TopSecret", false},
		{"user info and bad setting", "clickhouse://u:TopSecret@127.0.0.1:1/db?compress_level=x", "TopSecret", false},
		{"http protocol", "http://u:TopSecret@127.0.0.1:1/db", "TopSecret", false},
		{"no scheme", "u:TopSecret@127.0.0.1:1/db", "TopSecret", false},
		{"control character", "clickhouse://u:Top\x7fSecret@127.0.0.1:1/db", "Top\x7fSecret", false},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, openErr := chconn.Open(ctx, tt.dsn)
			ensureErr := chconn.EnsureDatabase(ctx, tt.dsn)
			for what, err := range map[string]error{"Open": openErr, "EnsureDatabase": ensureErr} {
				if err == nil {
					t.Fatalf("%s(%q) succeeded", what, tt.dsn)
				}
				if usage.Is(err) == tt.refused {
					t.Errorf("%s: usage error %t, want %t: %v", what, usage.Is(err), !tt.refused, err)
				}
				if piece, ok := quotes(err.Error(), tt.password); ok {
					t.Errorf("%s error quotes %q of the password: %v", what, piece, err)
				}
			}
			if piece, ok := quotes(redact.DSN(tt.dsn), tt.password); ok {
				t.Errorf("Redact quotes %q of the password: %s", piece, redact.DSN(tt.dsn))
			}
		})
	}
}

// quotes reports whether msg holds a piece of password of 3 characters or more.
func quotes(msg, password string) (string, bool) {
	for i := 0; i+3 <= len(password); i++ {
		if piece := password[i : i+3]; strings.Contains(msg, piece) {
			return piece, true
		}
	}
	return "", false
}
