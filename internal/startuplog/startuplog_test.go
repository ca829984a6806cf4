package startuplog

import "testing"

// TestValue: what the start-up line shows of a flag's value; no secret passes.
func TestValue(t *testing.T) {
	for _, tc := range []struct{ flag, value, want string }{
		{"clickhouse.dsn", "clickhouse://u:pw@h:9000/db", "clickhouse://u:xxxxx@h:9000/db"},
		{"clickhouse.dsn", "clickhouse://h:9000/db?username=u&password=pw", "clickhouse://h:9000/db?password=xxxxx&username=u"},
		{"clickhouse.dsn", "u:pw@h:9000", "xxxxx"}, // no scheme: nothing tells where the password ends
		{"clickhouse.dsn", "clickhouse://h:9000/db", "clickhouse://h:9000/db"},
		{"kafka.sasl.password-file", "/run/secrets/kafka", "/run/secrets/kafka"}, // where, not what
		{"some.password", "hunter2", "xxxxx"},
		{"api.token", "abc", "xxxxx"},
		{"otlp.endpoint", "https://user:pw@otel:4318/v1/traces", "https://user:xxxxx@otel:4318/v1/traces"},
		{"endpoints", "http://a:1,http://u:pw@b:2", "http://a:1,http://u:xxxxx@b:2"},
		{"kafka.brokers", "kafka-0:9092,kafka-1:9092", "kafka-0:9092,kafka-1:9092"},
		{"retention.raw", "336h0m0s", "336h0m0s"},
		{"some.secret", "", ""},
	} {
		if got := Value(tc.flag, tc.value); got != tc.want {
			t.Errorf("Value(%q, %q) = %q, want %q", tc.flag, tc.value, got, tc.want)
		}
	}
}
