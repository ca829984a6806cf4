package shard

import (
	"context"
	"log/slog"
	"regexp"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slicemeter/slicemeter/internal/kafkaconn"
	"github.com/slicemeter/slicemeter/internal/usage"
)

// Defaults of the flags.
const (
	DefaultGroup          = "slicemeter-attribution"
	DefaultTopic          = "slicemeter.attribution.shards"
	DefaultPartitions     = 64
	DefaultSessionTimeout = 10 * time.Second
)

// Options are what the --attribution.shard.* flags say, and the Kafka security (--kafka.tls.*,
// --kafka.sasl.*, as every command that talks to Kafka has them), not yet checked.
type Options struct {
	Brokers        string
	Group          string
	Topic          string
	Partitions     int
	SessionTimeout time.Duration
	Security       kafkaconn.SecurityConfig
}

// topicName is what Kafka accepts as a topic name.
var topicName = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// Config checks the options (usage errors name the flag) and loads the security files. ok is
// false when sharding is off (--attribution.shard.brokers empty).
func (f *Options) Config() (cfg Config, ok bool, err error) {
	brokers := kafkaconn.ParseBrokers(f.Brokers)
	if len(brokers) == 0 {
		return Config{}, false, nil
	}
	switch {
	case f.Group == "":
		return Config{}, false, usage.Errorf("--attribution.shard.group is empty; expected the consumer group's name")
	case !topicName.MatchString(f.Topic) || f.Topic == "." || f.Topic == "..":
		return Config{}, false, usage.Errorf("--attribution.shard.topic %q: expected a Kafka topic name (1 to 249 letters, digits, '.', '_' or '-')", f.Topic)
	case f.Partitions < 1:
		return Config{}, false, usage.Errorf("--attribution.shard.partitions %d: expected at least 1 (a few times the replicas, e.g. %d)", f.Partitions, DefaultPartitions)
	case f.SessionTimeout < time.Second || f.SessionTimeout > 30*time.Minute:
		return Config{}, false, usage.Errorf("--attribution.shard.session-timeout %s: expected 1s to 30m (the brokers accept 6s to 30m by default)", f.SessionTimeout)
	}
	sec, err := f.Security.Load()
	if err != nil {
		return Config{}, false, err
	}
	return Config{
		Cluster: kafkaconn.Cluster{Brokers: brokers, Security: sec},
		Group:   f.Group, Topic: f.Topic, Partitions: f.Partitions, SessionTimeout: f.SessionTimeout,
	}, true, nil
}

// Open starts the group the options describe (see Start), or returns nil when sharding is off.
// Brokers that refuse the credentials or the certificate stop it at start with an error
// naming them; brokers that cannot be reached yet are retried in the background. The caller
// closes the group when it stops (Close is nil-safe), and gives the runner (its Shards) only
// a non-nil group (a nil *Group owns every node anyway):
//
//	g, err := opts.Open(ctx, logger, reg)
//	if err != nil {
//		return err
//	}
//	defer g.Close()
//	if g != nil {
//		passes.Shards = g
//	}
func (f *Options) Open(ctx context.Context, logger *slog.Logger, reg prometheus.Registerer) (*Group, error) {
	cfg, ok, err := f.Config()
	if err != nil || !ok {
		return nil, err
	}
	if cfg.Cluster.Security.Enabled() { // plaintext has nothing to refuse: no wait at start
		if err := cfg.Cluster.Check(ctx); kafkaconn.Refused(err) {
			return nil, err
		} else if err != nil {
			logger.Warn("attribution shards: Kafka is not reachable yet; attributing no node until this replica joins the group", "err", err)
		}
	}
	return Start(ctx, cfg, logger, reg)
}
