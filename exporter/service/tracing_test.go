package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"

	"github.com/slicemeter/slicemeter/internal/usage"
)

// The tests' secrets: a URL password and a header token, each with a bad percent escape.
const (
	secretPassword = "hunter2-Pw%zz"
	secretToken    = "tok3n-S3CRET%zz"
	badEndpoint    = "http://collector:" + secretPassword + "@otel.example:4318"
	badHeaders     = "Authorization=Bearer " + secretToken
)

func TestCheckOTelEnv(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string // the variable the error names; "" no error
	}{
		{"good", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://u:p%25w@otel.example:4318", "OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%20abc,x-team=gpu"}, ""},
		{"endpoint bad escape", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": badEndpoint}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{"traces endpoint bad escape", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": badEndpoint}, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"},
		{"endpoint without scheme", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "otel.example:4318"}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{"header bad escape", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel:4318", "OTEL_EXPORTER_OTLP_HEADERS": badHeaders}, "OTEL_EXPORTER_OTLP_HEADERS"},
		{"header without =", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_HEADERS": "x=1,Authorization: Bearer " + secretToken}, "OTEL_EXPORTER_OTLP_TRACES_HEADERS: pair 2"},
		{"header bad key", map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "Bearer " + secretToken + "=x"}, "OTEL_EXPORTER_OTLP_HEADERS: pair 1"},
		{"timeout", map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "10s"}, "OTEL_EXPORTER_OTLP_TIMEOUT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkOTelEnv(func(k string) string { return tt.env[k] })
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || !usage.Is(err) {
				t.Fatalf("error %v: want a usage error naming %q", err, tt.want)
			}
			for _, secret := range []string{"hunter2", "tok3n", "S3CRET"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("the error quotes the secret %q: %v", secret, err)
				}
			}
		})
	}
}

// otelHelperEnv makes TestOTelHelper, run as a subprocess, do what its value says.
const otelHelperEnv = "SLICEMETER_TEST_OTEL_HELPER"

// The process's stderr holds neither the URL password nor the header token when otel is
// given malformed variables: tracerProvider refuses them naming the variable, and otel's own
// parsing of them (as if the check had let them through) logs its messages without values.
// Without quietOTel, otel does print them: the threat is real and the test would see it.
func TestOTelPrintsNoSecrets(t *testing.T) {
	tests := []struct {
		mode  string
		leaks bool
		want  []string // in stderr
	}{
		{"quiet", false, []string{"OTEL_EXPORTER_OTLP_ENDPOINT: not a URL", "opentelemetry: parse url", "opentelemetry: escape header value", "msg=opentelemetry err=\"export failed: xxxxx\""}},
		{"otel-default", true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestOTelHelper$", "-test.count=1")
			cmd.Env = append(os.Environ(), otelHelperEnv+"="+tt.mode,
				"OTEL_EXPORTER_OTLP_ENDPOINT="+badEndpoint, "OTEL_EXPORTER_OTLP_HEADERS="+badHeaders)
			var stderr strings.Builder
			cmd.Stderr, cmd.Stdout = &stderr, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("helper: %v\n%s", err, stderr.String())
			}
			out := stderr.String()
			leaked := strings.Contains(out, "hunter2") || strings.Contains(out, "S3CRET")
			if leaked != tt.leaks {
				t.Errorf("secret in stderr: %v, want %v:\n%s", leaked, tt.leaks, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("stderr lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestOTelHelper is TestOTelPrintsNoSecrets's subprocess; on its own it does nothing.
func TestOTelHelper(t *testing.T) {
	mode := os.Getenv(otelHelperEnv)
	if mode == "" {
		t.Skip("run by TestOTelPrintsNoSecrets")
	}
	ctx := context.Background()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if mode == "quiet" {
		_, _, err := tracerProvider(ctx, logger)
		fmt.Fprintln(os.Stderr, "tracerProvider:", err)
	}
	if _, err := otlptracehttp.New(ctx); err != nil { // otel's parsing, logging through its logger
		fmt.Fprintln(os.Stderr, "otlptracehttp.New:", err)
	}
	otel.Handle(errors.New("export failed: Bearer " + secretToken))
}
