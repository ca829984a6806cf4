package chtest

import (
	"context"
	"log/slog"
	"strings"
	"sync"
)

// QueryRecorder is a slog.Handler that keeps the queries clickhouse-go logs as it sends them
// (values bound), for a test to run them through chDB (localtest.CheckQueriesWithChDB).
type QueryRecorder struct {
	mu      sync.Mutex
	queries []string
}

func (r *QueryRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *QueryRecorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *QueryRecorder) WithGroup(string) slog.Handler            { return r }

func (r *QueryRecorder) Handle(_ context.Context, rec slog.Record) error {
	if rec.Message != "sending query" {
		return nil
	}
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == "query" {
			r.mu.Lock()
			r.queries = append(r.queries, strings.TrimSpace(a.Value.String()))
			r.mu.Unlock()
		}
		return true
	})
	return nil
}

// All is every query recorded so far, trimmed.
func (r *QueryRecorder) All() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.queries...)
}

// Selects are the recorded queries other than INSERTs (a test's own data).
func (r *QueryRecorder) Selects() []string {
	var out []string
	for _, q := range r.All() {
		if !strings.HasPrefix(q, "INSERT") {
			out = append(out, q)
		}
	}
	return out
}

// QueriesSince are the queries recorded after the first n (All()[n:]) that a dialect check
// wants: every one but the INSERTs of a test's own rows (an INSERT … SELECT is the product's).
func (r *QueryRecorder) QueriesSince(n int) []string {
	var out []string
	for _, q := range r.All()[n:] {
		if !strings.HasPrefix(q, "INSERT") || strings.Contains(q, "SELECT") {
			out = append(out, q)
		}
	}
	return out
}
