package service

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/slicemeter/slicemeter/internal/kafkaconn"
	"github.com/slicemeter/slicemeter/internal/webserver"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The exporter starts without Kafka: sampling and /metrics start at once, /readyz says Kafka is
// missing, batches wait in the spool or the memory queue, and once the broker comes up the
// topic is made and every sample is delivered.
func TestStartsWithoutKafka(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  func(*Config)
	}{
		{"spool", func(c *Config) { c.SpoolDir, c.SpoolMaxBytes = t.TempDir(), 1<<20 }},
		{"memory queue", func(c *Config) { c.QueueMaxBytes = 1 << 20 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kafkaPort, webPort := freePort(t), freePort(t)
			addr := "127.0.0.1:" + strconv.Itoa(webPort)
			systemd, configFile := false, ""
			var ready atomic.Bool
			cfg := Config{Source: "sim", ScenarioPath: nodeScenario, SimStart: "now", FlushInterval: 200 * time.Millisecond,
				Brokers: []string{"127.0.0.1:" + strconv.Itoa(kafkaPort)}, Partitions: 2, Ready: &ready,
				Web: &webserver.Flags{FlagConfig: &web.FlagConfig{WebListenAddresses: &[]string{addr}, WebSystemdSocket: &systemd, WebConfigFile: &configFile}}}
			tc.cfg(&cfg)
			reg := webserver.NewRegistry()
			svc, err := New(cfg, reg, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer svc.Close()
			type result struct {
				n   int64
				err error
			}
			done := make(chan result, 1)
			go func() { n, err := svc.Run(context.Background()); done <- result{n, err} }()

			// Sampling without Kafka: /readyz names it, /metrics serves the ticks.
			for {
				code, body := get(t, "http://"+addr+"/readyz")
				if code == http.StatusServiceUnavailable && strings.Contains(body, "kafka: ") && ready.Load() {
					break
				}
				if code == http.StatusOK {
					t.Fatalf("/readyz is ready without Kafka: %q", body)
				}
				time.Sleep(20 * time.Millisecond)
			}
			for metric(t, reg, "slicemeter_exporter_ticks_total") < 3 {
				time.Sleep(20 * time.Millisecond)
			}
			if code, body := get(t, "http://"+addr+"/metrics"); code != http.StatusOK || !strings.Contains(body, "slicemeter_exporter_kafka_up 0") {
				t.Errorf("/metrics while Kafka is missing: %d, kafka_up 0 in it: %v", code, strings.Contains(body, "slicemeter_exporter_kafka_up 0"))
			}

			cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(kafkaPort))
			if err != nil {
				t.Fatal(err)
			}
			defer cluster.Close()
			res := <-done
			if res.err != nil {
				t.Fatal(res.err)
			}
			if res.n != 180 {
				t.Fatalf("%d samples taken, want 180", res.n)
			}
			published := metric(t, reg, "slicemeter_exporter_samples_published_total")
			if published != 180 {
				t.Errorf("%v samples published once Kafka came up, want all 180", published)
			}
			if up := metric(t, reg, "slicemeter_exporter_kafka_up"); up != 1 {
				t.Errorf("kafka_up = %v after delivery", up)
			}
		})
	}
}

// metric is the value of an unlabelled counter or gauge in reg (-1: not there).
func metric(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			m := mf.GetMetric()[0]
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return -1
}

// Stopping with batches Kafka never took fails, naming where they are: the spool's directory
// (kept for the next start), or the memory queue (lost).
func TestExitWithUndeliveredDataFails(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		cfg  func(*Config)
		want string
	}{
		{"spool", func(c *Config) { c.SpoolDir, c.SpoolMaxBytes = dir, 1<<20 }, "left in " + dir},
		{"memory queue", func(c *Config) { c.QueueMaxBytes = 1 << 20 }, "lost: no --spool.dir"},
		// The start-up check of a secured connection finds no broker: not fatal, it samples and queues.
		{"tls", func(c *Config) { c.QueueMaxBytes, c.Kafka = 1<<20, kafkaconn.SecurityConfig{TLS: true} }, "lost: no --spool.dir"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Source: "sim", ScenarioPath: nodeScenario, Fast: true, FlushInterval: time.Second,
				Brokers: []string{"127.0.0.1:" + strconv.Itoa(freePort(t))}, DrainTimeout: 300 * time.Millisecond}
			tc.cfg(&cfg)
			svc, err := New(cfg, prometheus.NewRegistry(), slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer svc.Close()
			n, err := svc.Run(context.Background())
			if err == nil || !strings.Contains(err.Error(), "undelivered") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run after %d samples: %v; want an error naming %q", n, err, tc.want)
			}
		})
	}
}

// A broker whose message.max.bytes is below a flush's batch: batches are split to fit (the
// limit given, or learnt from the broker's refusal), every sample is delivered, none dropped.
func TestBatchesOverTheBrokersLimitAreSplit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit int64  // --kafka.max-message-bytes; 0: read from the topic (kfake says 1 MB whatever it enforces)
		max   string // the broker's message.max.bytes, of the compressed record batch
	}{
		{"flag", 4000, "4000"},
		{"refused", 0, "700"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.BrokerConfigs(map[string]string{"message.max.bytes": tc.max}))
			if err != nil {
				t.Fatal(err)
			}
			defer cluster.Close()
			reg := prometheus.NewRegistry()
			// 3 s per batch of 6 instances: about 20 kB.
			cfg := Config{Source: "sim", ScenarioPath: nodeScenario, Fast: true, FlushInterval: 3 * time.Second,
				Brokers: cluster.ListenAddrs(), Partitions: 1, SpoolDir: t.TempDir(), SpoolMaxBytes: 1 << 20, MaxMessageBytes: tc.limit}
			svc, err := New(cfg, reg, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			defer svc.Close()
			n, err := svc.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if published := metric(t, reg, "slicemeter_exporter_samples_published_total"); published != float64(n) || n != 180 {
				t.Errorf("%v of %d samples published", published, n)
			}
			if batches := metric(t, reg, "slicemeter_exporter_batches_published_total"); batches < 5 {
				t.Errorf("%v batches: the 3 s batch was not split", batches)
			}
		})
	}
}
