package webserver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/exporter-toolkit/web"
	"golang.org/x/crypto/bcrypt"
)

// selfSigned writes a certificate for 127.0.0.1 and its key into dir and returns a pool that
// trusts it.
func selfSigned(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "slicemeter-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for name, block := range map[string]*pem.Block{"cert.pem": {Type: "CERTIFICATE", Bytes: der}, "key.pem": {Type: "EC PRIVATE KEY", Bytes: keyDER}} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool
}

// With a web config of TLS and basic auth, the basic auth guards /metrics and every other path
// but those that authenticate themselves (BearerPaths): /api/v1 answers its own bearer token
// and is not opened by the basic-auth password, nor closed for want of it.
func TestBasicAuthLeavesBearerPathsToTheirOwnAuth(t *testing.T) {
	dir := t.TempDir()
	pool := selfSigned(t, dir)
	hash, err := bcrypt.GenerateFromPassword([]byte("scrape-pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "web.yml")
	if err := os.WriteFile(config, []byte("tls_server_config:\n  cert_file: cert.pem\n  key_file: key.pem\n"+
		"http_server_config:\n  headers:\n    X-Frame-Options: deny\n"+
		"basic_auth_users:\n  prom: "+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	logs := &lockedBuffer{}
	addrs, systemd := []string{"127.0.0.1:0"}, false
	errc := Serve(ctx, Options{
		Flags:       &Flags{FlagConfig: &web.FlagConfig{WebListenAddresses: &addrs, WebSystemdSocket: &systemd, WebConfigFile: &config}, Limits: DefaultLimits()},
		Registry:    prometheus.NewRegistry(),
		Logger:      slog.New(slog.NewTextHandler(logs, nil)),
		BearerPaths: []string{"/api/v1/"},
		Routes: []func(*http.ServeMux){func(mux *http.ServeMux) {
			mux.HandleFunc("GET /api/v1/whoami", func(w http.ResponseWriter, r *http.Request) { // the API's own check
				if r.Header.Get("Authorization") != "Bearer api-token" {
					http.Error(w, "bearer token required", http.StatusUnauthorized)
					return
				}
				_, _ = io.WriteString(w, "operator")
			})
		}},
	})
	t.Cleanup(func() {
		cancel()
		for range errc {
		}
	})
	var addr string
	for deadline := time.Now().Add(10 * time.Second); addr == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := listening.FindStringSubmatch(logs.String()); m != nil {
			addr = m[1]
		}
	}
	if addr == "" {
		t.Fatalf("the server did not log its address:\n%s", logs.String())
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	tests := []struct {
		name, path string
		user, pass string // basic auth, when user is set
		bearer     string
		code       int
		body       string
	}{
		{"metrics without credentials", "/metrics", "", "", "", 401, "Unauthorized"},
		{"metrics with the password", "/metrics", "prom", "scrape-pw", "", 200, ""},
		{"metrics with a wrong password", "/metrics", "prom", "nope", "", 401, ""},
		{"metrics with an unknown user", "/metrics", "root", "scrape-pw", "", 401, ""},
		{"metrics with a bearer token", "/metrics", "", "", "api-token", 401, ""},
		{"healthz without credentials", "/healthz", "", "", "", 401, ""},
		{"api with its bearer token", "/api/v1/whoami", "", "", "api-token", 200, "operator"},
		{"api without credentials", "/api/v1/whoami", "", "", "", 401, "bearer token required"},
		{"api with the basic password only", "/api/v1/whoami", "prom", "scrape-pw", "", 401, "bearer token required"},
		{"a path that leaves the api", "/api/v1/../metrics", "", "", "api-token", 401, ""},
		{"a path that leaves the api, encoded", "/api/v1/%2e%2e/metrics", "", "", "api-token", 401, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, "https://"+addr+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tt.user != "" {
				req.SetBasicAuth(tt.user, tt.pass)
			}
			if tt.bearer != "" {
				req.Header.Set("Authorization", "Bearer "+tt.bearer)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.code || !strings.Contains(string(b), tt.body) {
				t.Errorf("%s: %d %q, want %d and %q", tt.path, resp.StatusCode, b, tt.code, tt.body)
			}
			if resp.Header.Get("X-Frame-Options") != "deny" {
				t.Errorf("%s: the web config's headers are missing: %v", tt.path, resp.Header)
			}
		})
	}
}
