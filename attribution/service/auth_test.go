package service

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/api"
	"github.com/slicemeter/slicemeter/internal/usage"
)

// TestAuthConfig: the API's authentication is required (a usage error naming both flags),
// --api.insecure-no-auth is warned about once, and a bad auth file is a usage error naming it.
func TestAuthConfig(t *testing.T) {
	t.Parallel()
	base := Config{Interval: time.Minute, Window: time.Hour}
	base.MaxMinutes = 1
	tests := []struct {
		name     string
		file     string
		insecure bool
		err      string // from Validate or authorizer
		warnings int
	}{
		{"none", "", false, "give --api.auth-file FILE (tokens, JWT), or --api.insecure-no-auth", 0},
		{"both", "auth.yaml", true, "expected one of them", 0},
		{"insecure", "", true, "", 1},
		{"missing file", "testdata/none.yaml", false, "--api.auth-file: open testdata/none.yaml", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base
			cfg.AuthFile, cfg.InsecureNoAuth = tt.file, tt.insecure
			var log bytes.Buffer
			err := cfg.Validate()
			var authz api.Authorizer
			if err == nil {
				authz, err = cfg.authorizer(slog.New(slog.NewTextHandler(&log, nil)))
			}
			switch {
			case tt.err != "" && (!usage.Is(err) || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("error %v; want a usage error naming %q", err, tt.err)
			case tt.err == "" && err != nil:
				t.Fatal(err)
			case tt.err == "" && authz == nil:
				t.Fatal("no authorizer")
			}
			if got := strings.Count(log.String(), "level=WARN"); got != tt.warnings || tt.warnings > 0 && !strings.Contains(log.String(), "--api.insecure-no-auth") {
				t.Errorf("%d warnings, want %d naming the flag:\n%s", got, tt.warnings, log.String())
			}
		})
	}
}
