package kafkaconn_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
	"github.com/slicemeter/slicemeter/internal/usage"
)

func TestSecurityConfigLoad(t *testing.T) {
	files := localtest.TestTLS(t)
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(pw, []byte("s3cret-value\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		name string
		cfg  kafkaconn.SecurityConfig
		want string // "" accepted; else in the usage error
		says string // what Security.String says when accepted
	}{
		{"plaintext", kafkaconn.SecurityConfig{}, "", "plaintext"},
		{"tls with system roots", kafkaconn.SecurityConfig{TLS: true}, "", "TLS"},
		{"ca file implies tls", kafkaconn.SecurityConfig{CAFile: files.CAFile}, "", "TLS"},
		{"client cert", kafkaconn.SecurityConfig{CAFile: files.CAFile, CertFile: files.ClientCert, KeyFile: files.ClientKey}, "", "TLS"},
		{"scram over tls", kafkaconn.SecurityConfig{TLS: true, Mechanism: "scram-sha-512", Username: "alice", PasswordFile: pw}, "",
			"SASL SCRAM-SHA-512 as user alice over TLS"},
		{"plain without tls", kafkaconn.SecurityConfig{Mechanism: "plain", Username: "bob", PasswordFile: pw}, "", "SASL PLAIN as user bob over plaintext"},
		{"scram-sha-256", kafkaconn.SecurityConfig{Mechanism: "scram-sha-256", Username: "c", PasswordFile: pw}, "", "SASL SCRAM-SHA-256 as user c over plaintext"},
		{"missing ca file", kafkaconn.SecurityConfig{CAFile: missing}, "--kafka.tls.ca-file: open " + missing, ""},
		{"ca file without pem", kafkaconn.SecurityConfig{CAFile: pw}, "--kafka.tls.ca-file " + pw + ": no PEM certificate", ""},
		{"cert without key", kafkaconn.SecurityConfig{CertFile: files.ClientCert}, "expected both or neither", ""},
		{"key without cert", kafkaconn.SecurityConfig{KeyFile: files.ClientKey}, "expected both or neither", ""},
		{"key of another cert", kafkaconn.SecurityConfig{CertFile: files.ClientCert, KeyFile: files.ServerKey}, "--kafka.tls.cert-file " + files.ClientCert, ""},
		{"user without mechanism", kafkaconn.SecurityConfig{Username: "a"}, "need --kafka.sasl.mechanism", ""},
		{"password without mechanism", kafkaconn.SecurityConfig{PasswordFile: pw}, "need --kafka.sasl.mechanism", ""},
		{"mechanism without user", kafkaconn.SecurityConfig{Mechanism: "plain", PasswordFile: pw}, "--kafka.sasl.username is empty", ""},
		{"mechanism without password", kafkaconn.SecurityConfig{Mechanism: "scram-sha-256", Username: "a"}, "--kafka.sasl.password-file is empty", ""},
		{"missing password file", kafkaconn.SecurityConfig{Mechanism: "plain", Username: "a", PasswordFile: missing}, "--kafka.sasl.password-file: open " + missing, ""},
		{"empty password file", kafkaconn.SecurityConfig{Mechanism: "plain", Username: "a", PasswordFile: empty}, "--kafka.sasl.password-file " + empty + ": the file is empty", ""},
		{"unknown mechanism", kafkaconn.SecurityConfig{Mechanism: "gssapi", Username: "a", PasswordFile: pw}, `--kafka.sasl.mechanism: "gssapi" is not a mechanism`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sec, err := tc.cfg.Load()
			if err != nil && strings.Contains(err.Error(), "s3cret-value") {
				t.Errorf("the error shows the password: %v", err)
			}
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				if got := sec.String(); got != tc.says {
					t.Errorf("String() = %q, want %q", got, tc.says)
				}
				if strings.Contains(sec.String(), "s3cret-value") {
					t.Errorf("String() shows the password")
				}
				return
			}
			if err == nil || !usage.Is(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load: %v; want a usage error containing %q", err, tc.want)
			}
		})
	}
}

// TestKafkaSASL: every mechanism over TLS with a client certificate against a real broker, and
// what a client told the wrong thing hears: wrong password, wrong CA or server name, no client
// certificate, TLS to a plaintext port.
func TestKafkaSASL(t *testing.T) {
	sk := localtest.NewSecureKafka(t)
	brokers := []string{sk.SASLSSLBrokers()}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, u := range sk.Users {
		t.Run(u.Mechanism, func(t *testing.T) {
			sec, err := kafkaconn.SecurityConfig{CAFile: sk.TLS.CAFile, CertFile: sk.TLS.ClientCert, KeyFile: sk.TLS.ClientKey, Mechanism: u.Mechanism, Username: u.Name, PasswordFile: u.PasswordFile}.Load()
			if err != nil {
				t.Fatal(err)
			}
			kc := kafkaconn.Cluster{Brokers: brokers, Security: sec}
			if err := kc.Check(ctx); err != nil {
				t.Fatalf("Check: %v", err)
			}
			topic := "sasl-" + u.Mechanism
			if err := kc.EnsureTopics(ctx, 1, topic); err != nil {
				t.Fatalf("EnsureTopics: %v", err)
			}
			w := kc.NewWriter(topic, nil)
			defer w.Close()
			if err := w.WriteMessages(ctx, kafka.Message{Key: []byte("k"), Value: []byte(u.Mechanism)}); err != nil {
				t.Fatalf("write: %v", err)
			}
			r := kc.NewGroupReader("g-"+u.Mechanism, nil, topic)
			defer r.Close()
			m, err := r.FetchMessage(ctx)
			if err != nil || string(m.Value) != u.Mechanism {
				t.Fatalf("fetch: %q, %v", m.Value, err)
			}
			if err := r.CommitMessages(ctx, m); err != nil {
				t.Fatalf("commit: %v", err)
			}
			if n, err := kc.TopicMaxMessageBytes(ctx, topic); err != nil || n <= 0 {
				t.Fatalf("TopicMaxMessageBytes: %d, %v", n, err)
			}
		})
	}
	// --kafka.tls.insecure-skip-verify accepts a certificate no given CA signed.
	sec, err := kafkaconn.SecurityConfig{CAFile: sk.TLS.OtherCAFile, InsecureSkipVerify: true, CertFile: sk.TLS.ClientCert,
		KeyFile: sk.TLS.ClientKey, Mechanism: "plain", Username: sk.User("plain").Name, PasswordFile: sk.User("plain").PasswordFile}.Load()
	if err != nil {
		t.Fatal(err)
	}
	if err := (kafkaconn.Cluster{Brokers: brokers, Security: sec}).Check(ctx); err != nil {
		t.Errorf("Check with --kafka.tls.insecure-skip-verify: %v", err)
	}
	plaintext := sk.Brokers()
	for _, tc := range []struct {
		name    string
		brokers string
		cfg     kafkaconn.SecurityConfig
		want    []string
		refused bool // false: the broker just hangs up, as a broker going down does
	}{
		{"wrong scram password", brokers[0], kafkaconn.SecurityConfig{CAFile: sk.TLS.CAFile, CertFile: sk.TLS.ClientCert, KeyFile: sk.TLS.ClientKey, Mechanism: "scram-sha-512",
			Username: sk.User("scram-sha-512").Name, PasswordFile: sk.WrongPasswordFile},
			[]string{brokers[0], "refused the credentials", "SCRAM-SHA-512", sk.User("scram-sha-512").Name}, true},
		{"wrong plain password", brokers[0], kafkaconn.SecurityConfig{CAFile: sk.TLS.CAFile, CertFile: sk.TLS.ClientCert, KeyFile: sk.TLS.ClientKey, Mechanism: "plain",
			Username: sk.User("plain").Name, PasswordFile: sk.WrongPasswordFile},
			[]string{brokers[0], "refused the credentials", "PLAIN"}, true},
		{"scram user with another mechanism", brokers[0], kafkaconn.SecurityConfig{CAFile: sk.TLS.CAFile, CertFile: sk.TLS.ClientCert, KeyFile: sk.TLS.ClientKey, Mechanism: "scram-sha-256",
			Username: sk.User("scram-sha-512").Name, PasswordFile: sk.User("scram-sha-512").PasswordFile},
			[]string{brokers[0], "refused the credentials", "SCRAM-SHA-256"}, true},
		{"untrusted certificate", brokers[0], kafkaconn.SecurityConfig{CAFile: sk.TLS.OtherCAFile, CertFile: sk.TLS.ClientCert, KeyFile: sk.TLS.ClientKey},
			[]string{brokers[0], "not trusted", "--kafka.tls.ca-file"}, true},
		{"wrong server name", brokers[0], kafkaconn.SecurityConfig{CAFile: sk.TLS.CAFile, CertFile: sk.TLS.ClientCert, KeyFile: sk.TLS.ClientKey, ServerName: "kafka.elsewhere"},
			[]string{brokers[0], "not trusted", "--kafka.tls.server-name"}, true},
		{"no client certificate", brokers[0], kafkaconn.SecurityConfig{CAFile: sk.TLS.CAFile, Mechanism: "plain",
			Username: sk.User("plain").Name, PasswordFile: sk.User("plain").PasswordFile},
			[]string{brokers[0], "refused the TLS connection", "--kafka.tls.cert-file"}, true},
		{"tls to the plaintext listener", plaintext, kafkaconn.SecurityConfig{TLS: true},
			[]string{plaintext, "(TLS)"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sec, err := tc.cfg.Load()
			if err != nil {
				t.Fatal(err)
			}
			kc := kafkaconn.Cluster{Brokers: []string{tc.brokers}, Security: sec}
			err = kc.Check(ctx)
			if err == nil || kafkaconn.Refused(err) != tc.refused {
				t.Fatalf("Check: %v; want an error, a refusal: %v", err, tc.refused)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Check: %v; want it to say %q", err, w)
				}
			}
			for _, u := range sk.Users {
				if strings.Contains(err.Error(), u.Password) {
					t.Errorf("the error shows a password: %v", err)
				}
			}
			// The same refusal from the start-up topic creation, not a wait for the timeout.
			if err := kc.EnsureTopics(ctx, 1, "never"); err == nil || kafkaconn.Refused(err) != tc.refused || !strings.Contains(err.Error(), tc.brokers) {
				t.Errorf("EnsureTopics: %v; want the same error naming the broker", err)
			}
		})
	}
}
