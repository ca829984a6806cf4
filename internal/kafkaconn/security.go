package kafkaconn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/slicemeter/slicemeter/internal/usage"
)

// SASL mechanisms, as --kafka.sasl.mechanism names them.
const (
	MechanismPlain       = "plain"
	MechanismSCRAMSHA256 = "scram-sha-256"
	MechanismSCRAMSHA512 = "scram-sha-512"
)

// SecurityConfig is how a client secures its Kafka connections, as the --kafka.tls.* and
// --kafka.sasl.* flags say it: file paths and names, not yet read. The zero value is
// plaintext without authentication.
type SecurityConfig struct {
	TLS                bool   // --kafka.tls.enable
	CAFile             string // --kafka.tls.ca-file: PEM CA certificates; empty: the system's
	CertFile, KeyFile  string // --kafka.tls.cert-file, --kafka.tls.key-file: a client certificate
	ServerName         string // --kafka.tls.server-name; empty: the broker's host name
	InsecureSkipVerify bool   // --kafka.tls.insecure-skip-verify
	Mechanism          string // --kafka.sasl.mechanism; empty: no SASL
	Username           string // --kafka.sasl.username
	PasswordFile       string // --kafka.sasl.password-file: the password is never a flag value
}

// Security is a loaded SecurityConfig: what kafka-go's Transport and Dialer take. The zero
// value is plaintext without authentication.
type Security struct {
	TLS  *tls.Config    // nil: plaintext
	SASL sasl.Mechanism // nil: no authentication
	user string         // for error messages; the password is kept only inside SASL
}

// Load reads the files c names and checks that its flags fit together. Its errors are usage
// errors (exit 2) naming the flag and the file; none contains the password.
func (c SecurityConfig) Load() (Security, error) {
	var s Security
	if c.TLS || c.CAFile != "" || c.CertFile != "" || c.KeyFile != "" || c.ServerName != "" || c.InsecureSkipVerify {
		t, err := c.loadTLS()
		if err != nil {
			return Security{}, err
		}
		s.TLS = t
	}
	switch {
	case c.Mechanism == "" && (c.Username != "" || c.PasswordFile != ""):
		return Security{}, usage.Errorf("--kafka.sasl.username and --kafka.sasl.password-file need --kafka.sasl.mechanism (%s, %s or %s)",
			MechanismPlain, MechanismSCRAMSHA256, MechanismSCRAMSHA512)
	case c.Mechanism == "":
		return s, nil
	case c.Username == "":
		return Security{}, usage.Errorf("--kafka.sasl.mechanism %s: --kafka.sasl.username is empty; expected the SASL user name", c.Mechanism)
	case c.PasswordFile == "":
		return Security{}, usage.Errorf("--kafka.sasl.mechanism %s: --kafka.sasl.password-file is empty; expected a file holding the password", c.Mechanism)
	}
	b, err := os.ReadFile(c.PasswordFile)
	if err != nil {
		return Security{}, usage.Errorf("--kafka.sasl.password-file: %v", err)
	}
	password := strings.TrimRight(string(b), "\r\n")
	if password == "" {
		return Security{}, usage.Errorf("--kafka.sasl.password-file %s: the file is empty; expected the SASL password", c.PasswordFile)
	}
	s.user = c.Username
	switch c.Mechanism {
	case MechanismPlain:
		s.SASL = plain.Mechanism{Username: c.Username, Password: password}
	case MechanismSCRAMSHA256, MechanismSCRAMSHA512:
		algo := scram.SHA256
		if c.Mechanism == MechanismSCRAMSHA512 {
			algo = scram.SHA512
		}
		if s.SASL, err = scram.Mechanism(algo, c.Username, password); err != nil {
			// The error names the user, never the password (SASLprep of either failed).
			return Security{}, usage.Errorf("--kafka.sasl.username %q or --kafka.sasl.password-file %s: %v", c.Username, c.PasswordFile, err)
		}
	default:
		return Security{}, usage.Errorf("--kafka.sasl.mechanism: %q is not a mechanism; expected %s, %s or %s",
			c.Mechanism, MechanismPlain, MechanismSCRAMSHA256, MechanismSCRAMSHA512)
	}
	return s, nil
}

func (c SecurityConfig) loadTLS() (*tls.Config, error) {
	t := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName, InsecureSkipVerify: c.InsecureSkipVerify} //nolint:gosec // an operator's explicit choice
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, usage.Errorf("--kafka.tls.ca-file: %v", err)
		}
		t.RootCAs = x509.NewCertPool()
		if !t.RootCAs.AppendCertsFromPEM(pem) {
			return nil, usage.Errorf("--kafka.tls.ca-file %s: no PEM certificate in the file; expected CA certificates in PEM", c.CAFile)
		}
	}
	switch {
	case c.CertFile == "" && c.KeyFile == "":
	case c.CertFile == "" || c.KeyFile == "":
		return nil, usage.Errorf("--kafka.tls.cert-file %q and --kafka.tls.key-file %q: expected both or neither", c.CertFile, c.KeyFile)
	default:
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, usage.Errorf("--kafka.tls.cert-file %s, --kafka.tls.key-file %s: %v", c.CertFile, c.KeyFile, err)
		}
		t.Certificates = []tls.Certificate{cert}
	}
	return t, nil
}

// Enabled reports whether connections use TLS or SASL.
func (s Security) Enabled() bool { return s.TLS != nil || s.SASL != nil }

// String says how connections are made, for logs and errors: "plaintext", "TLS",
// "SASL SCRAM-SHA-512 as user alice over TLS".
func (s Security) String() string {
	tlsWord := "plaintext"
	if s.TLS != nil {
		tlsWord = "TLS"
	}
	if s.SASL == nil {
		return tlsWord
	}
	return fmt.Sprintf("SASL %s as user %s over %s", s.SASL.Name(), s.user, tlsWord)
}

// transport is what the clients' connections go through: kafka-go's default for plaintext (nil),
// as before TLS and SASL were supported; else one of their own, whose dial timeout covers the
// TLS handshake and the SASL exchange too.
func (s Security) transport() kafka.RoundTripper {
	if !s.Enabled() {
		return nil
	}
	return &kafka.Transport{TLS: s.TLS, SASL: s.SASL, DialTimeout: 10 * time.Second}
}

// dialer is the consumer-group reader's: kafka-go's default (nil) for plaintext.
func (s Security) dialer() *kafka.Dialer {
	if !s.Enabled() {
		return nil
	}
	return &kafka.Dialer{Timeout: 10 * time.Second, DualStack: true, TLS: s.TLS, SASLMechanism: s.SASL}
}

// closeIdle closes the idle connections of a transport made for one call (the default one is
// shared and left alone).
func closeIdle(rt kafka.RoundTripper) {
	if t, ok := rt.(*kafka.Transport); ok {
		t.CloseIdleConnections()
	}
}

// explain makes an authentication or TLS failure say which broker refused what: kafka-go's own
// error names neither.
func (s Security) explain(where string, err error) error {
	if err == nil {
		return nil
	}
	var certErr *tls.CertificateVerificationError
	var recErr tls.RecordHeaderError
	switch {
	case errors.Is(err, kafka.SASLAuthenticationFailed):
		return fmt.Errorf("kafka brokers %s refused the credentials (%s): %w", where, s, err)
	case errors.Is(err, kafka.UnsupportedSASLMechanism):
		return fmt.Errorf("kafka brokers %s do not offer %s: %w", where, s, err)
	case errors.As(err, &certErr):
		return fmt.Errorf("kafka brokers %s: their TLS certificate is not trusted (see --kafka.tls.ca-file, --kafka.tls.server-name): %w", where, err)
	case errors.As(err, &recErr):
		return fmt.Errorf("kafka brokers %s do not speak TLS on that port: %w", where, err)
	case tlsAlert(err):
		return fmt.Errorf("kafka brokers %s refused the TLS connection (a client certificate? see --kafka.tls.cert-file): %w", where, err)
	}
	return err
}

// CheckTimeout bounds Check.
const CheckTimeout = 10 * time.Second

// Check connects to the brokers and asks for metadata once, within CheckTimeout, so that a
// refused password or an untrusted certificate is reported at start, naming the brokers and
// the mechanism, instead of being retried in the background. A broker that cannot be reached
// is an error too: the caller decides whether that one is fatal (Unreachable says).
func (c Cluster) Check(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, CheckTimeout)
	defer cancel()
	t := c.Security.transport()
	defer closeIdle(t)
	client := &kafka.Client{Addr: kafka.TCP(c.Brokers...), Timeout: CheckTimeout, Transport: t}
	_, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{}})
	if err != nil {
		where := strings.Join(c.Brokers, ",")
		if e := c.Security.explain(where, err); e != err {
			return e
		}
		return fmt.Errorf("kafka brokers %s (%s): %w", where, c.Security, err)
	}
	return nil
}

// Refused reports whether err says the brokers answered and refused this client (credentials,
// mechanism, certificate): retrying will not help, unlike a broker that is down.
func Refused(err error) bool {
	var certErr *tls.CertificateVerificationError
	var recErr tls.RecordHeaderError
	return errors.Is(err, kafka.SASLAuthenticationFailed) || errors.Is(err, kafka.UnsupportedSASLMechanism) ||
		errors.As(err, &certErr) || errors.As(err, &recErr) || tlsAlert(err)
}

// tlsAlert reports whether err is a TLS alert the broker sent (crypto/tls returns it as a
// net.OpError "remote error"), e.g. "certificate required".
func tlsAlert(err error) bool {
	var opErr *net.OpError
	return errors.As(err, &opErr) && opErr.Op == "remote error"
}
