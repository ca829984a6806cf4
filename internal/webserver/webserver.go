// Package webserver serves what every slicemeter process serves: /metrics, /healthz, /readyz
// and the routes a service adds, with exporter-toolkit's web config (TLS, basic auth).
package webserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/exporter-toolkit/web"
)

// NewRegistry returns a registry with the process and Go runtime collectors and
// slicemeter_build_info (the version, revision and branch prometheus/common/version holds).
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		versioncollector.NewCollector("slicemeter"))
	return reg
}

// Options are what one process serves.
type Options struct {
	Flags    *Flags               // listen addresses, web config file, limits; no address serves nothing
	Registry *prometheus.Registry // served on /metrics (MetricsHandler)
	Direct   TextCollector        // if not nil, served on /metrics beside Registry, not registered in it
	Ready    *atomic.Bool         // /readyz answers 503 while false; nil: always ready
	// Missing, if set, says what the process still lacks (e.g. "kafka: dial tcp …: connection
	// refused"): /readyz answers 503 with one line each while there is any.
	Missing func() []string
	Routes  []func(*http.ServeMux)
	// BearerPaths are the path prefixes of routes that authenticate their callers themselves
	// (the attribution API's bearer tokens): the web config's basic auth guards every other
	// path, not these (basicauth.go).
	BearerPaths []string
	Logger      *slog.Logger
}

// Serve serves until ctx ends. The channel yields the error that stopped the server, if any,
// and is closed when the server has stopped; with no listen address it is closed at once.
func Serve(ctx context.Context, o Options) <-chan error {
	errc := make(chan error, 1)
	if !o.Flags.Serves() {
		close(errc)
		return errc
	}
	f, limits := o.Flags.FlagConfig, o.Flags.Limits
	metrics, err := MetricsHandler(o.Registry, o.Direct)
	if err == nil {
		err = limits.check()
	}
	if err != nil {
		errc <- err
		close(errc)
		return errc
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", o.readyz)
	for _, add := range o.Routes {
		add(mux)
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.Default()
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: limits.ReadHeaderTimeout, ReadTimeout: limits.ReadTimeout,
		WriteTimeout: limits.WriteTimeout, IdleTimeout: limits.IdleTimeout}
	go func() {
		var err error
		if ownListeners(f) {
			var listeners []net.Listener
			if listeners, err = limits.listen(*f.WebListenAddresses); err == nil {
				if f.WebConfigFile != nil && *f.WebConfigFile != "" {
					err = serveWebConfig(listeners, srv, *f.WebConfigFile, o.BearerPaths, logger)
				} else {
					err = web.ServeMultiple(listeners, srv, f, logger)
				}
			}
		} else {
			logger.Warn("the connection caps apply only to TCP listen addresses: not applied", "max_connections", limits.MaxConnections)
			if len(o.BearerPaths) > 0 {
				logger.Warn("with a systemd socket or vsock, the web config's basic auth (if any) guards every path, the bearer paths too", "bearer_paths", o.BearerPaths)
			}
			err = web.ListenAndServe(srv, f, logger)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- err
		}
		close(errc)
	}()
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	return errc
}

// readyz answers 200 "ready", or 503 with what is missing, one line each.
func (o Options) readyz(w http.ResponseWriter, _ *http.Request) {
	var missing []string
	if o.Ready != nil && !o.Ready.Load() {
		missing = append(missing, "not started yet")
	}
	if o.Missing != nil {
		missing = append(missing, o.Missing()...)
	}
	if len(missing) > 0 {
		http.Error(w, "not ready:\n"+strings.Join(missing, "\n"), http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ready\n"))
}

// RunServing runs fn to its end; a failure to serve ends it at once with that error.
func RunServing(webErr <-chan error, fn func() error) error {
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case err, ok := <-webErr:
		if ok && err != nil {
			return fmt.Errorf("serving /metrics: %w", err)
		}
		return <-done
	}
}
