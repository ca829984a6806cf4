package localtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TLSFiles are PEM files made by TestTLS for one test: a CA, a server certificate it signed
// (for 127.0.0.1 and localhost) and a client certificate it signed.
type TLSFiles struct {
	CAFile string
	// ServerKeystore holds the server's PKCS #8 key and then its certificate, as Kafka's PEM
	// keystore (ssl.keystore.type=PEM) takes them.
	ServerKeystore        string
	ServerCert, ServerKey string
	ClientCert, ClientKey string
	OtherCAFile           string // a CA that signed none of them, for tests of distrust
}

// TestTLS makes a fresh CA and certificates with crypto/x509 in t's temporary directory.
func TestTLS(t testing.TB) TLSFiles {
	t.Helper()
	dir := t.TempDir()
	f := TLSFiles{
		CAFile: filepath.Join(dir, "ca.pem"), OtherCAFile: filepath.Join(dir, "other-ca.pem"),
		ServerKeystore: filepath.Join(dir, "server-keystore.pem"),
		ServerCert:     filepath.Join(dir, "server.pem"), ServerKey: filepath.Join(dir, "server-key.pem"),
		ClientCert: filepath.Join(dir, "client.pem"), ClientKey: filepath.Join(dir, "client-key.pem"),
	}
	caKey, caDER := makeCert(t, nil, nil, &x509.Certificate{
		Subject: pkix.Name{CommonName: "slicemeter test CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	})
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, f.CAFile, "CERTIFICATE", caDER)
	_, otherDER := makeCert(t, nil, nil, &x509.Certificate{
		Subject: pkix.Name{CommonName: "another CA"}, IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	})
	writePEM(t, f.OtherCAFile, "CERTIFICATE", otherDER)

	srvKey, srvDER := makeCert(t, caCert, caKey, &x509.Certificate{
		Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	srvKeyDER := pkcs8(t, srvKey)
	writePEM(t, f.ServerCert, "CERTIFICATE", srvDER)
	writePEM(t, f.ServerKey, "PRIVATE KEY", srvKeyDER)
	keystore := append(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: srvKeyDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER})...)
	keystore = append(keystore, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})...)
	if err := os.WriteFile(f.ServerKeystore, keystore, 0o600); err != nil {
		t.Fatal(err)
	}

	cliKey, cliDER := makeCert(t, caCert, caKey, &x509.Certificate{
		Subject: pkix.Name{CommonName: "slicemeter test client"}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	writePEM(t, f.ClientCert, "CERTIFICATE", cliDER)
	writePEM(t, f.ClientKey, "PRIVATE KEY", pkcs8(t, cliKey))
	return f
}

// makeCert makes a key and a certificate from tmpl, signed by parent (self-signed if nil).
func makeCert(t testing.TB, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, tmpl *x509.Certificate) (*ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	return key, der
}

func pkcs8(t testing.TB, key *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
