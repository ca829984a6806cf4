package localtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slicemeter/slicemeter/deploy/local"
)

// KafkaUser is a SASL user of a SecureKafka: Mechanism as --kafka.sasl.mechanism spells it.
type KafkaUser struct {
	Mechanism, Name, Password string
	PasswordFile              string // holds Password and a newline
}

// SecureKafka is a Kafka broker with a SASL_SSL listener (SASLSSLBrokers) whose certificate
// TLS.CAFile signed and which requires a client certificate TLS.CAFile signed (TLS.ClientCert),
// and one user per mechanism: PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 (the
// SCRAM ones created by `kafka-storage format --add-scram`).
type SecureKafka struct {
	*local.Kafka
	TLS   TLSFiles
	Users []KafkaUser
	// WrongPasswordFile holds a password no user has.
	WrongPasswordFile string
}

// NewSecureKafka starts a SecureKafka of t's own, closed when t ends. The passwords are random.
func NewSecureKafka(t testing.TB) *SecureKafka {
	t.Helper()
	SkipShort(t, "Kafka")
	files := TestTLS(t)
	dir := t.TempDir()
	sk := &SecureKafka{TLS: files}
	opts := &local.KafkaSASLSSL{KeystoreFile: files.ServerKeystore, ClientCAFile: files.CAFile, Plain: map[string]string{}}
	for _, m := range []string{"plain", "scram-sha-256", "scram-sha-512"} {
		u := KafkaUser{Mechanism: m, Name: "user-" + m, Password: randomPassword(t)}
		u.PasswordFile = filepath.Join(dir, u.Name+".password")
		writeFile(t, u.PasswordFile, u.Password+"\n")
		if m == "plain" {
			opts.Plain[u.Name] = u.Password
		} else {
			opts.SCRAM = append(opts.SCRAM, strings.ToUpper(m)+"=[name="+u.Name+",password="+u.Password+"]")
		}
		sk.Users = append(sk.Users, u)
	}
	sk.WrongPasswordFile = filepath.Join(dir, "wrong.password")
	writeFile(t, sk.WrongPasswordFile, randomPassword(t)+"\n")
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	k, err := local.StartKafka(ctx, local.KafkaOptions{SASLSSL: opts})
	if err != nil {
		t.Fatalf("starting a Kafka broker with a SASL_SSL listener: %v", err)
	}
	t.Cleanup(func() { _ = k.Close() })
	sk.Kafka = k
	return sk
}

// User is the user of mechanism m.
func (s *SecureKafka) User(m string) KafkaUser {
	for _, u := range s.Users {
		if u.Mechanism == m {
			return u
		}
	}
	panic("localtest: no Kafka user for mechanism " + m)
}

func randomPassword(t testing.TB) string {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "pw-" + hex.EncodeToString(b)
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
