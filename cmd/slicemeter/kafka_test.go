//go:build !exporter_only

package main

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"

	"github.com/slicemeter/slicemeter/attribution/shard"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
	"github.com/slicemeter/slicemeter/internal/usage"
)

// The flags kafkaSecurityFlags registers fill the SecurityConfig, from the command line or the
// environment (the binary's DefaultEnvars).
func TestKafkaSecurityFlags(t *testing.T) {
	app := kingpin.New("x", "")
	app.DefaultEnvars()
	var cfg kafkaconn.SecurityConfig
	kafkaSecurityFlags(app.Command("c", ""), &cfg)
	t.Setenv("X_KAFKA_SASL_USERNAME", "from-env")
	if _, err := app.Parse([]string{"c", "--kafka.tls.ca-file", "ca.pem", "--kafka.tls.server-name", "kafka.internal",
		"--kafka.sasl.mechanism", "scram-sha-256", "--kafka.sasl.password-file", "pw", "--kafka.tls.insecure-skip-verify"}); err != nil {
		t.Fatal(err)
	}
	want := kafkaconn.SecurityConfig{CAFile: "ca.pem", ServerName: "kafka.internal", InsecureSkipVerify: true,
		Mechanism: "scram-sha-256", Username: "from-env", PasswordFile: "pw"}
	if cfg != want {
		t.Errorf("flags gave %+v, want %+v", cfg, want)
	}
	if _, err := app.Parse([]string{"c", "--kafka.sasl.mechanism", "md5"}); err == nil {
		t.Error("an unknown mechanism was accepted")
	}
}

func parseShardFlags(t *testing.T, args ...string) *shard.Options {
	t.Helper()
	app := kingpin.New("test", "")
	f := shardFlags(app.Command("attribution", ""))
	if _, err := app.Parse(append([]string{"attribution"}, args...)); err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	return f
}

func TestShardFlags(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		on      bool
		wantErr string // a usage error containing this
	}{
		{args: nil},
		{args: []string{"--attribution.shard.brokers=", "--attribution.shard.partitions=0"}}, // off: nothing else checked
		{args: []string{"--attribution.shard.brokers=k1:9092,k2:9092"}, on: true},
		{args: []string{"--attribution.shard.brokers=k:9092", "--attribution.shard.group="}, wantErr: "--attribution.shard.group is empty"},
		{args: []string{"--attribution.shard.brokers=k:9092", "--attribution.shard.topic=a/b"}, wantErr: `--attribution.shard.topic "a/b"`},
		{args: []string{"--attribution.shard.brokers=k:9092", "--attribution.shard.topic=.."}, wantErr: `--attribution.shard.topic ".."`},
		{args: []string{"--attribution.shard.brokers=k:9092", "--attribution.shard.partitions=0"}, wantErr: "--attribution.shard.partitions 0: expected at least 1"},
		{args: []string{"--attribution.shard.brokers=k:9092", "--attribution.shard.session-timeout=500ms"}, wantErr: "--attribution.shard.session-timeout 500ms"},
		{args: []string{"--attribution.shard.brokers=k:9092", "--attribution.shard.session-timeout=1h"}, wantErr: "--attribution.shard.session-timeout 1h0m0s"},
		{args: []string{"--attribution.shard.brokers=k:9092", "--kafka.sasl.username=u"}, wantErr: "--kafka.sasl.username"},
	} {
		cfg, on, err := parseShardFlags(t, tt.args...).Config()
		switch {
		case tt.wantErr != "":
			if err == nil || !usage.Is(err) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: err %v, want a usage error with %q", tt.args, err, tt.wantErr)
			}
		case err != nil || on != tt.on:
			t.Errorf("%q: on %v, err %v; want on %v", tt.args, on, err, tt.on)
		case on && (strings.Join(cfg.Cluster.Brokers, ",") != "k1:9092,k2:9092" || cfg.Group != shard.DefaultGroup || cfg.Topic != shard.DefaultTopic ||
			cfg.Partitions != shard.DefaultPartitions || cfg.SessionTimeout != shard.DefaultSessionTimeout):
			t.Errorf("%q: config %+v", tt.args, cfg)
		}
	}
	if g, err := parseShardFlags(t).Open(context.Background(), slog.New(slog.DiscardHandler), nil); g != nil || err != nil {
		t.Errorf("Open without brokers: %v, %v; want nil, nil", g, err)
	}
}
