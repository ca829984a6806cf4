package main

import (
	"github.com/alecthomas/kingpin/v2"

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
