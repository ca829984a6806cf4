package redact_test

import (
	"testing"

	"github.com/slicemeter/slicemeter/internal/redact"
)

func TestDSN(t *testing.T) {
	tests := []struct{ dsn, want string }{
		{"clickhouse://127.0.0.1:9000/db", "clickhouse://127.0.0.1:9000/db"},
		{"clickhouse://u:pw@127.0.0.1:9000/db", "clickhouse://u:xxxxx@127.0.0.1:9000/db"},
		{"clickhouse://u@127.0.0.1:9000/db", "clickhouse://u@127.0.0.1:9000/db"},
		{"clickhouse://h:9000/db?password=pw&dial_timeout=1s", "clickhouse://h:9000/db?dial_timeout=1s&password=xxxxx"},
		{"clickhouse://h:9000/db?http_proxy=http%3A%2F%2Fa%3Ab%40p%3A3128", "clickhouse://h:9000/db?http_proxy=http%3A%2F%2Fxxxxx%40p%3A3128"},
		{"clickhouse://u:p%zz@h:9000/db", "clickhouse://xxxxx"},
		{"u:p%zz@h:9000/db", "xxxxx"},
	}
	for _, tt := range tests {
		if got := redact.DSN(tt.dsn); got != tt.want {
			t.Errorf("DSN(%q) = %q, want %q", tt.dsn, got, tt.want)
		}
	}
}
