package main

import (
	"strconv"

	"github.com/alecthomas/kingpin/v2"

	"github.com/slicemeter/slicemeter/attribution/shard"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
)

// kafkaSecurityFlags registers the --kafka.tls.* and --kafka.sasl.* flags on cmd, filling
// into. Every command that talks to Kafka calls it, so the flags are the same everywhere.
func kafkaSecurityFlags(cmd *kingpin.CmdClause, into *kafkaconn.SecurityConfig) {
	cmd.Flag("kafka.tls.enable", "Connect to Kafka over TLS (implied by any other --kafka.tls.* flag).").BoolVar(&into.TLS)
	cmd.Flag("kafka.tls.ca-file", "PEM file of the CA certificates that sign the brokers' certificates (default: the system's).").StringVar(&into.CAFile)
	cmd.Flag("kafka.tls.cert-file", "PEM client certificate for TLS client authentication (with --kafka.tls.key-file).").StringVar(&into.CertFile)
	cmd.Flag("kafka.tls.key-file", "PEM private key of --kafka.tls.cert-file.").StringVar(&into.KeyFile)
	cmd.Flag("kafka.tls.server-name", "Name the brokers' certificates must carry (default: the host of each broker address).").StringVar(&into.ServerName)
	cmd.Flag("kafka.tls.insecure-skip-verify", "Do not verify the brokers' certificates (testing only).").BoolVar(&into.InsecureSkipVerify)
	cmd.Flag("kafka.sasl.mechanism", "SASL mechanism to authenticate to Kafka with (empty: none).").EnumVar(&into.Mechanism, "", kafkaconn.MechanismPlain, kafkaconn.MechanismSCRAMSHA256, kafkaconn.MechanismSCRAMSHA512)
	cmd.Flag("kafka.sasl.username", "SASL user name.").StringVar(&into.Username)
	cmd.Flag("kafka.sasl.password-file", "File holding the SASL password (one line; a trailing newline is ignored).").StringVar(&into.PasswordFile)
}

// shardFlags adds the --attribution.shard.* flags to the attribution command.
func shardFlags(cmd *kingpin.CmdClause) *shard.Options {
	f := &shard.Options{}
	cmd.Flag("attribution.shard.brokers", "Kafka brokers (host:port,...) of the consumer group that shares the nodes between attribution replicas; empty: no sharding, this replica attributes every node.").
		PlaceHolder("BROKERS").StringVar(&f.Brokers)
	cmd.Flag("attribution.shard.group", "Consumer group the attribution replicas of this deployment share.").Default(shard.DefaultGroup).StringVar(&f.Group)
	cmd.Flag("attribution.shard.topic", "Topic of the group (no message is written to it): a node belongs to partition FNV-1a(node) mod its partition count.").
		Default(shard.DefaultTopic).StringVar(&f.Topic)
	cmd.Flag("attribution.shard.partitions", "Partitions of the topic when it has to be created (an existing topic keeps its count; do not change it while replicas run).").
		Default(strconv.Itoa(shard.DefaultPartitions)).IntVar(&f.Partitions)
	cmd.Flag("attribution.shard.session-timeout", "How long Kafka waits for a replica that stopped before it gives its nodes to the others (the brokers accept 6s to 30m by default).").
		Default(shard.DefaultSessionTimeout.String()).DurationVar(&f.SessionTimeout)
	kafkaSecurityFlags(cmd, &f.Security)
	return f
}
