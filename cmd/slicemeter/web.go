package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/exporter-toolkit/web"

	"github.com/slicemeter/slicemeter/exporter/snapshot"
)

// newRegistry returns a registry with the process and Go runtime collectors.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// serveWeb serves /metrics, /healthz, /readyz and whatever routes adds, with exporter-toolkit's
// web config (TLS, basic auth), until ctx ends. ready reports readiness. An empty address list
// serves nothing.
func serveWeb(ctx context.Context, flags *web.FlagConfig, reg *prometheus.Registry, ready *atomic.Bool, logger *slog.Logger, routes ...func(*http.ServeMux)) <-chan error {
	errc := make(chan error, 1)
	if flags == nil || flags.WebListenAddresses == nil || len(*flags.WebListenAddresses) == 0 || (*flags.WebListenAddresses)[0] == "" {
		close(errc)
		return errc
	}
	metrics, err := snapshot.Handler(reg)
	if err != nil {
		errc <- err
		close(errc)
		return errc
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ready != nil && !ready.Load() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	for _, add := range routes {
		add(mux)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		err := web.ListenAndServe(srv, flags, logger)
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

// runServing runs fn to its end; a failure to serve /metrics ends the command at once.
func runServing(webErr <-chan error, fn func() error) error {
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
