package webserver

import (
	"crypto/sha256"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/exporter-toolkit/web"
	"go.yaml.in/yaml/v2"
	"golang.org/x/crypto/bcrypt"
	"golang.org/x/time/rate"

	"github.com/slicemeter/slicemeter/internal/faillimit"
	"github.com/slicemeter/slicemeter/internal/lograte"
)

// exporter-toolkit's web.Serve applies the web config's basic_auth_users to every path, and a
// request can carry one Authorization header: with basic auth on, no bearer token of the API
// could ever pass. So with a web config file (on TCP listen addresses) the config is served
// here as the toolkit serves it — TLS from its tls_server_config (through the toolkit's
// ConfigToTLSConfig, reloaded on every connection), its http_server_config headers, its
// rate_limit, its users' bcrypt hashes, re-read on every request — except that basic auth
// leaves Options.BearerPaths to the routes' own authentication.

// readWebConfig reads the web config file as the toolkit does: strict YAML, TLS 1.2 to 1.3
// and HTTP/2 unless it says otherwise, file paths relative to the file.
func readWebConfig(file string) (*web.Config, error) {
	content, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	c := &web.Config{TLSConfig: web.TLSConfig{MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS13}, HTTPConfig: web.HTTPConfig{HTTP2: true}}
	if err := yaml.UnmarshalStrict(content, c); err != nil {
		return nil, fmt.Errorf("web config %s: %w", file, err)
	}
	c.TLSConfig.SetDirectory(filepath.Dir(file))
	return c, nil
}

// configHandler applies the web config to every request before next.
type configHandler struct {
	file    string
	next    http.Handler
	bearer  []string // path prefixes left to next's own authentication
	logger  *slog.Logger
	limiter *rate.Limiter // nil: none
	// logs: a web config that cannot be read fails every request; one line a minute says so.
	logs *lograte.Limiter

	// One bcrypt check at a time (as the toolkit: each takes tens of ms of a core), and the
	// logins proven, by the digest of user, hash and password. Only successes are kept: wrong
	// passwords, however many, never push a valid login out (and make it wait for bcrypt).
	checking sync.Mutex
	mu       sync.Mutex
	known    map[[sha256.Size]byte]bool
	// failures limits the wrong passwords of each client address: past it, 429 without bcrypt.
	failures *faillimit.Limiter
	compare  func(hash, password []byte) error // bcrypt's; a seam for the tests
}

// maxKnownLogins bounds the proven-login cache; past it the cache starts over.
const maxKnownLogins = 1024

// fakeHash stands in for an unknown user's hash, so that the time of a check does not tell
// which users exist (the toolkit's: bcrypt of "fakepassword").
const fakeHash = "$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi"

func (h *configHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, err := readWebConfig(h.file)
	if err != nil {
		h.logs.Log(r.Context(), time.Now(), slog.LevelError, "web_config", "unable to read the web config", "err", err)
		http.Error(w, http.StatusText(http.StatusInternalServerError), http.StatusInternalServerError)
		return
	}
	if h.limiter != nil && !h.limiter.Allow() {
		http.Error(w, http.StatusText(http.StatusTooManyRequests), http.StatusTooManyRequests)
		return
	}
	for k, v := range c.HTTPConfig.Header {
		w.Header().Set(k, v)
	}
	if len(c.Users) == 0 || h.ownAuth(r) {
		h.next.ServeHTTP(w, r)
		return
	}
	switch ok, wait := h.login(r, c); {
	case ok:
		h.next.ServeHTTP(w, r)
		return
	case wait > 0:
		w.Header().Set("Retry-After", fmt.Sprint(int(faillimit.RetryAfter(wait).Seconds())))
		http.Error(w, "too many wrong passwords from this address", http.StatusTooManyRequests)
		return
	}
	w.Header().Set("WWW-Authenticate", "Basic")
	http.Error(w, http.StatusText(http.StatusUnauthorized), http.StatusUnauthorized)
}

// ownAuth says whether r's path is one of the bearer paths. Only a clean path counts: one with
// "." or ".." segments (also percent-encoded) is redirected by the mux to its clean form,
// which is then checked in turn.
func (h *configHandler) ownAuth(r *http.Request) bool {
	p := r.URL.Path
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	if p != clean {
		return false
	}
	for _, prefix := range h.bearer {
		if strings.HasPrefix(p, prefix) {
			return true
		}
	}
	return false
}

// login checks r's basic-auth user and password against the config's bcrypt hashes. A login
// proven before is known by its digest; a new one costs a bcrypt check, which an address past
// its limit of wrong passwords is not given: it is told how long to wait instead.
func (h *configHandler) login(r *http.Request, c *web.Config) (ok bool, wait time.Duration) {
	user, pass, ok := r.BasicAuth()
	if !ok {
		return false, 0
	}
	hash, valid := c.Users[user]
	if !valid {
		hash = fakeHash
	}
	key := sha256.Sum256([]byte(user + "\x00" + string(hash) + "\x00" + pass))
	h.mu.Lock()
	known := h.known[key]
	h.mu.Unlock()
	if known {
		return true, 0
	}
	// Counted as a failure before the check, refunded if it succeeds: many requests at once
	// from one address cannot all start a check.
	addr := faillimit.Address(r)
	if wait := h.failures.Fail(addr); wait > 0 {
		return false, wait
	}
	h.checking.Lock()
	h.mu.Lock()
	known = h.known[key] // proven by another request meanwhile
	h.mu.Unlock()
	good := known || h.compare([]byte(hash), []byte(pass)) == nil && valid
	h.checking.Unlock()
	if !good {
		return false, 0
	}
	h.failures.Refund(addr)
	h.mu.Lock()
	if h.known == nil || len(h.known) >= maxKnownLogins {
		h.known = map[[sha256.Size]byte]bool{}
	}
	h.known[key] = true
	h.mu.Unlock()
	return true, 0
}

func newConfigHandler(file string, next http.Handler, bearer []string, logger *slog.Logger) *configHandler {
	return &configHandler{file: file, next: next, bearer: bearer, logger: logger, logs: lograte.New(logger, time.Minute), failures: faillimit.New(), compare: bcrypt.CompareHashAndPassword}
}

// serveWebConfig serves srv on the listeners with the web config file (validated as the
// toolkit validates it), until the server is shut down.
func serveWebConfig(listeners []net.Listener, srv *http.Server, file string, bearer []string, logger *slog.Logger) error {
	if err := web.Validate(file); err != nil {
		return fmt.Errorf("web config %s: %w", file, err)
	}
	c, err := readWebConfig(file)
	if err != nil {
		return err
	}
	h := newConfigHandler(file, srv.Handler, bearer, logger)
	if c.RateLimiterConfig.Interval != 0 {
		h.limiter = rate.NewLimiter(rate.Every(c.RateLimiterConfig.Interval), c.RateLimiterConfig.Burst)
	}
	srv.Handler = h
	useTLS := c.TLSConfig.IsEnabled()
	if useTLS {
		if srv.TLSConfig, err = web.ConfigToTLSConfig(&c.TLSConfig); err != nil {
			return fmt.Errorf("web config %s: %w", file, err)
		}
		protos := []string{"http/1.1"}
		if c.HTTPConfig.HTTP2 {
			protos = []string{"h2", "http/1.1"}
		} else {
			srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
		}
		// Certificates are read again on every connection, as the toolkit does, so that a
		// renewed one is served without a restart.
		srv.TLSConfig.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
			c, err := readWebConfig(file)
			if err != nil {
				return nil, err
			}
			conf, err := web.ConfigToTLSConfig(&c.TLSConfig)
			if err != nil {
				return nil, err
			}
			conf.NextProtos = protos
			return conf, nil
		}
	}
	errc := make(chan error, len(listeners))
	for _, l := range listeners {
		logger.Info("Listening on", "address", l.Addr().String())
		logger.Info("TLS is "+map[bool]string{true: "enabled.", false: "disabled."}[useTLS], "address", l.Addr().String(), "basic_auth", len(c.Users) > 0, "bearer_paths", bearer)
		go func() {
			if useTLS {
				errc <- srv.ServeTLS(l, "", "")
				return
			}
			errc <- srv.Serve(l)
		}()
	}
	var first error
	for range listeners {
		if err := <-errc; first == nil {
			first = err
		}
	}
	return first
}
