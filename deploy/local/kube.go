package local

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	_ "embed"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// KubeAPIServerVersion is the Kubernetes release whose kube-apiserver the harness builds and runs.
const KubeAPIServerVersion = "1.31.4"

// kubeStartTimeout bounds the wait for etcd and then kube-apiserver to get ready; the API server
// installs its built-in objects (priority classes, RBAC bootstrap roles) before /readyz is 200.
const kubeStartTimeout = 120 * time.Second

// kubeBuildScript builds kube-apiserver into the cache; install-deps.sh runs the same file.
//
//go:embed kube/build-kube-apiserver.sh
var kubeBuildScript []byte

// kubeAdminToken is the static bearer token of the admin user (group system:masters). The
// server listens on loopback only and lives as long as a test.
const kubeAdminToken = "slicemeter-test-admin"

// KubeAPIServerBinary returns the path of kube-apiserver built from the Go module
// k8s.io/kubernetes at KubeAPIServerVersion, building it the first time (minutes) into
// CacheDir()/kube-apiserver-VERSION/bin. The marker there holds the build script's SHA-256
// and the version, which install-deps.sh writes the same way; concurrent callers wait for one
// build (the script locks the directory).
func KubeAPIServerBinary(ctx context.Context, log *slog.Logger) (string, error) {
	log = orDefault(log)
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	home := filepath.Join(cache, "kube-apiserver-"+KubeAPIServerVersion)
	bin := filepath.Join(home, "bin", "kube-apiserver")
	sum := sha256.Sum256(kubeBuildScript)
	want := hex.EncodeToString(sum[:]) + " v" + KubeAPIServerVersion
	if b, err := os.ReadFile(filepath.Join(home, "bin.complete")); err == nil && strings.TrimSpace(string(b)) == want {
		return bin, nil
	}
	if _, err := exec.LookPath("go"); err != nil {
		return "", fmt.Errorf("kube-apiserver is not built in %s and go, which builds it, is missing from PATH", home)
	}
	if err := os.MkdirAll(home, 0o755); err != nil {
		return "", fmt.Errorf("creating kube-apiserver's cache directory: %w", err)
	}
	// A file of this caller's own: bash reads a script as it runs, so another caller must not
	// rewrite the one being read. The script takes the cache's lock itself.
	f, err := os.CreateTemp(home, "build-kube-apiserver-*.sh")
	if err != nil {
		return "", fmt.Errorf("writing kube-apiserver's build script: %w", err)
	}
	script := f.Name()
	defer os.Remove(script)
	_, werr := f.Write(kubeBuildScript)
	if cerr := f.Close(); werr != nil || cerr != nil {
		return "", fmt.Errorf("writing kube-apiserver's build script %s: %v %v", script, werr, cerr)
	}
	log.Info("building kube-apiserver from k8s.io/kubernetes (once, minutes)", "version", KubeAPIServerVersion, "into", home)
	began := time.Now()
	cmd := exec.CommandContext(ctx, "bash", script, KubeAPIServerVersion, home)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building kube-apiserver %s with %s: %w\n%s", KubeAPIServerVersion, script, err, lastLines(out.String(), 40))
	}
	log.Info("kube-apiserver built", "took", time.Since(began).Round(time.Second))
	return bin, nil
}

// KubeOptions configures StartKubeAPIServer. The zero value is ready to use.
type KubeOptions struct {
	// KeepDir leaves the servers' directory (certs, etcd data, logs) in place after Close.
	KeepDir bool
	// TempDir is where the directory is created; "" means os.TempDir().
	TempDir string
	// Logger receives the harness's own messages; nil discards them.
	Logger *slog.Logger
}

// KubeAPIServer is a real kube-apiserver on 127.0.0.1 over its own etcd (Debian's etcd-server),
// both children of the caller, with certificates made here. There is no controller manager,
// scheduler or kubelet: objects are stored and validated, nothing reconciles them. The
// ServiceAccount admission plugin is off, since no controller creates the default service
// accounts that pods would otherwise need.
type KubeAPIServer struct {
	etcd, api *process
	dir       string
	keepDir   bool
	log       *slog.Logger
	url       string
	ca        []byte // PEM of the CA that signed the serving certificate
}

// StartKubeAPIServer builds kube-apiserver if needed (see KubeAPIServerBinary), starts etcd and
// the API server on free loopback ports, and returns once /readyz answers 200. ctx bounds the
// startup only.
func StartKubeAPIServer(ctx context.Context, opts KubeOptions) (*KubeAPIServer, error) {
	log := orDefault(opts.Logger)
	etcdBin, err := exec.LookPath("etcd")
	if err != nil {
		return nil, fmt.Errorf("etcd is missing: "+installHint, "etcd-server")
	}
	apiBin, err := KubeAPIServerBinary(ctx, log)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(opts.TempDir, "slicemeter-kube-")
	if err != nil {
		return nil, fmt.Errorf("creating the API server's directory: %w", err)
	}
	k := &KubeAPIServer{dir: dir, keepDir: opts.KeepDir, log: log}
	began := time.Now()
	// A port from FreePort can be taken before etcd or the API server binds it; start again
	// on new ports, in an emptied directory, when that happened.
	for attempt := 1; ; attempt++ {
		err := k.start(ctx, etcdBin, apiBin)
		if err == nil {
			break
		}
		_ = k.stop() // the start's error says why; a crash on the way down adds nothing
		if attempt == 3 || !k.lostPortRace() {
			return nil, err // the directory stays, with the logs the error quotes from
		}
		log.Info("kube-apiserver or etcd lost a port race; retrying on new ports", "attempt", attempt)
		if err := os.RemoveAll(dir); err != nil {
			return nil, fmt.Errorf("emptying the API server's directory: %w", err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("creating the API server's directory: %w", err)
		}
	}
	log.Info("kube-apiserver started", "url", k.url, "pid", k.api.pid(), "dir", dir, "took", time.Since(began).Round(time.Millisecond))
	return k, nil
}

func (k *KubeAPIServer) start(ctx context.Context, etcdBin, apiBin string) error {
	ctx, cancel := context.WithTimeout(ctx, kubeStartTimeout)
	defer cancel()
	var ports [3]int
	for i := range ports {
		p, err := FreePort()
		if err != nil {
			return err
		}
		ports[i] = p
	}
	if err := k.writeCerts(); err != nil {
		return err
	}
	clientURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	etcdLog := filepath.Join(k.dir, "etcd.log")
	etcd, err := startProcess("etcd", k.dir, etcdLog, etcdBin,
		"--name=slicemeter", "--data-dir="+filepath.Join(k.dir, "etcd"),
		"--listen-client-urls="+clientURL, "--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=slicemeter="+peerURL, "--log-outputs=stderr")
	if err != nil {
		return err
	}
	k.etcd = etcd
	if err := etcd.waitReady(ctx, 100*time.Millisecond, []string{etcdLog}, func(ctx context.Context) error {
		return httpOK(ctx, http.DefaultClient, clientURL+"/health", "")
	}); err != nil {
		return fmt.Errorf("starting etcd on %s (dir %s): %w", clientURL, k.dir, err)
	}
	f := func(name string) string { return filepath.Join(k.dir, name) }
	apiLog := f("kube-apiserver.log")
	api, err := startProcess("kube-apiserver", k.dir, apiLog, apiBin,
		"--etcd-servers="+clientURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port="+strconv.Itoa(ports[2]),
		"--cert-dir="+f("certs"), "--tls-cert-file="+f("serving.crt"), "--tls-private-key-file="+f("serving.key"),
		"--token-auth-file="+f("tokens.csv"), "--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+f("sa.pub"), "--service-account-signing-key-file="+f("sa.key"),
		"--service-cluster-ip-range=10.96.0.0/16", "--allow-privileged=true",
		"--disable-admission-plugins=ServiceAccount", "--enable-priority-and-fairness=false",
		"--profiling=false", "--v=0")
	if err != nil {
		return err
	}
	k.api = api
	k.url = "https://127.0.0.1:" + strconv.Itoa(ports[2])
	client, err := k.httpClient()
	if err != nil {
		return err
	}
	if err := api.waitReady(ctx, 250*time.Millisecond, []string{apiLog}, func(ctx context.Context) error {
		return httpOK(ctx, client, k.url+"/readyz", kubeAdminToken)
	}); err != nil {
		return fmt.Errorf("starting kube-apiserver on %s (dir %s): %w", k.url, k.dir, err)
	}
	return nil
}

// lostPortRace tells whether a failed start was a port that another process bound first (Go's
// "bind: address already in use", in either server's log).
func (k *KubeAPIServer) lostPortRace() bool {
	for _, name := range []string{"etcd.log", "kube-apiserver.log"} {
		b, _ := os.ReadFile(filepath.Join(k.dir, name))
		if bytes.Contains(bytes.ToLower(b), []byte("address already in use")) {
			return true
		}
	}
	return false
}

// writeCerts makes the CA, the serving certificate for 127.0.0.1 and localhost, the service
// account signing key and the static token file of the admin user.
func (k *KubeAPIServer) writeCerts() error {
	ca, err := newTestCA("slicemeter test Kubernetes CA")
	if err != nil {
		return err
	}
	certPEM, keyPEM, err := ca.Issue("kube-apiserver", []string{"localhost", "kubernetes", "kubernetes.default.svc"}, []net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		return err
	}
	saKey, saPub, err := newSigningKeyPEM()
	if err != nil {
		return err
	}
	k.ca = ca.CertPEM
	files := map[string][]byte{
		"ca.crt":      ca.CertPEM,
		"serving.crt": certPEM,
		"serving.key": keyPEM,
		"sa.key":      saKey,
		"sa.pub":      saPub,
		"tokens.csv":  []byte(kubeAdminToken + `,admin,admin-uid,"system:masters"` + "\n"),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(k.dir, name), b, 0o600); err != nil {
			return fmt.Errorf("writing the API server's %s: %w", name, err)
		}
	}
	return nil
}

func (k *KubeAPIServer) httpClient() (*http.Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(k.ca) {
		return nil, fmt.Errorf("the API server's CA certificate does not parse")
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}, nil
}

// httpOK GETs url (with a bearer token unless "") and wants 200.
func httpOK(ctx context.Context, c *http.Client, url, token string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// URL is the API server's address, "https://127.0.0.1:PORT".
func (k *KubeAPIServer) URL() string { return k.url }

// Token is the bearer token of the admin user (group system:masters).
func (k *KubeAPIServer) Token() string { return kubeAdminToken }

// CACertPEM is the CA that signed the serving certificate, PEM-encoded.
func (k *KubeAPIServer) CACertPEM() []byte { return k.ca }

// HTTPClient trusts the server's CA; requests still need the bearer Token.
func (k *KubeAPIServer) HTTPClient() (*http.Client, error) { return k.httpClient() }

// Kubeconfig returns the text of a kubeconfig for the admin user, with the CA inlined.
func (k *KubeAPIServer) Kubeconfig() string {
	return "apiVersion: v1\nkind: Config\n" +
		"clusters:\n- name: slicemeter-test\n  cluster:\n    server: " + k.url + "\n" +
		"    certificate-authority-data: " + base64Std(k.ca) + "\n" +
		"users:\n- name: admin\n  user:\n    token: " + kubeAdminToken + "\n" +
		"contexts:\n- name: slicemeter-test\n  context:\n    cluster: slicemeter-test\n    user: admin\n" +
		"current-context: slicemeter-test\n"
}

// WriteKubeconfig writes Kubeconfig into the server's directory and returns its path, for
// kubectl --kubeconfig and the exporter's --kubernetes.kubeconfig.
func (k *KubeAPIServer) WriteKubeconfig() (string, error) {
	path := filepath.Join(k.dir, "kubeconfig")
	if err := os.WriteFile(path, []byte(k.Kubeconfig()), 0o600); err != nil {
		return "", fmt.Errorf("writing the kubeconfig: %w", err)
	}
	return path, nil
}

// Dir is the servers' directory: certificates, etcd's data, both logs.
func (k *KubeAPIServer) Dir() string { return k.dir }

// stop terminates the API server, then etcd; the first failure is returned.
func (k *KubeAPIServer) stop() error {
	var first error
	for _, p := range []*process{k.api, k.etcd} {
		if p == nil {
			continue
		}
		if err := p.terminate(k.log, stopGrace); err != nil && first == nil {
			first = err
		}
	}
	k.api, k.etcd = nil, nil
	return first
}

// Close stops both servers and removes the directory, unless it is to be kept.
func (k *KubeAPIServer) Close() error {
	err := k.stop()
	if k.keepDir || k.dir == "" {
		return err
	}
	if rerr := os.RemoveAll(k.dir); rerr != nil && err == nil {
		err = fmt.Errorf("removing the API server's directory: %w", rerr)
	}
	k.dir = ""
	return err
}
