package service

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/slicemeter/slicemeter/internal/usage"
)

// tracerProvider returns an OpenTelemetry tracer provider exporting over OTLP/HTTP when the
// standard OTEL_EXPORTER_OTLP_* variables name an endpoint; otherwise nil (no tracing).
//
// An endpoint URL or a header can carry credentials, and otel's own parsing of them logs a
// malformed value in full to stderr: so the variables are checked here first (an error names
// the variable, never its value), and otel's logger and error handler are replaced by ones
// that print no values.
func tracerProvider(ctx context.Context, logger *slog.Logger) (trace.TracerProvider, func(), error) {
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return nil, func() {}, nil
	}
	if logger == nil {
		logger = slog.Default()
	}
	quietOTel(logger, os.Getenv)
	if err := checkOTelEnv(os.Getenv); err != nil {
		return nil, nil, err
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, nil, usage.Errorf("OTEL_EXPORTER_OTLP_*: %v", redactor(os.Getenv).Replace(err.Error()))
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName("slicemeter-exporter"))))
	return tp, func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = tp.Shutdown(sctx)
	}, nil
}

// The OTLP variables that may hold secrets (a URL's user and password, header tokens) and the
// one that must be a number; their values are never printed.
var (
	otelEndpointVars = []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"}
	otelHeaderVars   = []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"}
	otelTimeoutVars  = []string{"OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"}
)

const notShown = "(the value is not shown: it may hold credentials)"

// checkOTelEnv refuses (exit 2) the OTLP variables that otel could not parse, naming the
// variable and what was expected but not the value.
func checkOTelEnv(getenv func(string) string) error {
	for _, name := range otelEndpointVars {
		v := getenv(name)
		if v == "" {
			continue
		}
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usage.Errorf("%s: not a URL such as https://collector:4318 %s; percent-encode %%, @, / and : in a user or password (%% as %%25)", name, notShown)
		}
	}
	for _, name := range otelHeaderVars {
		v := getenv(name)
		if v == "" {
			continue
		}
		for i, pair := range strings.Split(v, ",") {
			key, value, ok := strings.Cut(pair, "=")
			_, err := url.PathUnescape(value)
			if !ok || !validHeaderKey(strings.TrimSpace(key)) || err != nil {
				return usage.Errorf("%s: pair %d is not KEY=VALUE with a header name as KEY and a percent-encoded VALUE %s", name, i+1, notShown)
			}
		}
	}
	for _, name := range otelTimeoutVars {
		if v := getenv(name); v != "" {
			if _, err := strconv.Atoi(v); err != nil {
				return usage.Errorf("%s: expected a whole number of milliseconds", name)
			}
		}
	}
	return nil
}

// validHeaderKey: an HTTP token (RFC 9110), as otel requires.
func validHeaderKey(key string) bool {
	if key == "" {
		return false
	}
	for _, c := range key {
		if c > 0x7e || c <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, c) {
			return false
		}
	}
	return true
}

// redactor replaces in a text the values of the secret-bearing variables, their header values
// and their URLs' user information with xxxxx.
func redactor(getenv func(string) string) *strings.Replacer {
	var secrets []string
	for _, name := range append(append([]string{}, otelEndpointVars...), otelHeaderVars...) {
		v := getenv(name)
		if v == "" {
			continue
		}
		secrets = append(secrets, v)
		if u, err := url.Parse(v); err == nil && u.User != nil {
			secrets = append(secrets, u.User.String(), u.User.Username())
			if p, ok := u.User.Password(); ok {
				secrets = append(secrets, p)
			}
		}
		for _, pair := range strings.Split(v, ",") {
			if _, value, ok := strings.Cut(pair, "="); ok {
				secrets = append(secrets, value)
				if dec, err := url.PathUnescape(value); err == nil {
					secrets = append(secrets, strings.TrimSpace(dec))
				}
			}
		}
	}
	var pairs []string
	for _, s := range secrets {
		if len(s) >= 3 { // shorter ones would blank out ordinary words of the message
			pairs = append(pairs, s, "xxxxx")
		}
	}
	return strings.NewReplacer(pairs...)
}

// quietOTel makes otel log through logger without any of the values its messages carry
// (otel's logger is the process's: otel offers no other), and its error handler log errors
// with the secrets of the OTLP variables redacted.
func quietOTel(logger *slog.Logger, getenv func(string) string) {
	otel.SetLogger(logr.New(valuelessSink{logger: logger}))
	r := redactor(getenv)
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Error("opentelemetry", "err", r.Replace(err.Error()))
	}))
}

// valuelessSink is a logr.LogSink that logs a message and the keys that came with it, never
// their values nor an error's text (otel's "parse url" error quotes the URL).
type valuelessSink struct{ logger *slog.Logger }

func (valuelessSink) Init(logr.RuntimeInfo) {}

// Enabled passes otel's errors and warnings (verbosity 0 and 1), not its info and debug.
func (valuelessSink) Enabled(level int) bool { return level <= 1 }

func (s valuelessSink) Info(_ int, msg string, keysAndValues ...any) {
	s.logger.Warn("opentelemetry: "+msg, "keys", keysOf(keysAndValues))
}

func (s valuelessSink) Error(err error, msg string, keysAndValues ...any) {
	s.logger.Error("opentelemetry: "+msg, "keys", keysOf(keysAndValues), "err_type", fmt.Sprintf("%T", err),
		"hint", "check the OTEL_EXPORTER_OTLP_* variables; values are not logged")
}

func (s valuelessSink) WithValues(...any) logr.LogSink { return s }
func (s valuelessSink) WithName(string) logr.LogSink   { return s }

// keysOf is the keys of a logr key/value list.
func keysOf(kv []any) []string {
	var keys []string
	for i := 0; i < len(kv); i += 2 {
		keys = append(keys, fmt.Sprint(kv[i]))
	}
	return keys
}
