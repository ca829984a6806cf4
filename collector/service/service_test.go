package service

import (
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/collector"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
	"github.com/slicemeter/slicemeter/internal/usage"
)

func TestCheckRefusesWhatTheFlagsShouldNotAllow(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // "" for accepted
	}{
		{"fine", Config{Brokers: "a:1, b:2"}, ""},
		{"no broker", Config{Brokers: ","}, `--kafka.brokers: "," names no broker`},
		{"negative raw retention", Config{Brokers: "a:1", Collector: collector.Config{Retention: collector.Retention{Raw: -time.Hour}}},
			"--retention.raw: -1h0m0s is negative"},
		{"negative minute retention", Config{Brokers: "a:1", Collector: collector.Config{Retention: collector.Retention{Rollup1m: -time.Second}}},
			"--retention.rollup-1m: -1s is negative"},
		{"bad cluster name", Config{Brokers: "a:1", Cluster: "a-b"}, "--clickhouse.cluster: "},
		{"sasl without user", Config{Brokers: "a:1", Kafka: kafkaconn.SecurityConfig{Mechanism: kafkaconn.MechanismPlain}}, "--kafka.sasl.username is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc, err := tc.cfg.check()
			if tc.want == "" {
				if brokers := kc.Brokers; err != nil || len(brokers) != 2 {
					t.Fatalf("check: %v, %v; want two brokers", brokers, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !usage.Is(err) {
				t.Fatalf("check: %v; want a usage error containing %q", err, tc.want)
			}
		})
	}
}
