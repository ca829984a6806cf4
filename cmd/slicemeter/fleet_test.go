//go:build !exporter_only

package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/internal/usage"
)

// TestFleetCommand runs `slicemeter fleet` on a real, empty ClickHouse: a window not
// attributed exits 1 naming its first minute; bad flags and a price book with bad costs exit 2
// naming them.
func TestFleetCommand(t *testing.T) {
	db := localtest.Database(t, localtest.DatabaseOptions{})
	book := filepath.Join(t.TempDir(), "prices.yaml")
	const good = "version: 1\ncurrency: USD\nprices: {A100-SXM4-40GB: 1.60}\ntiers: {pro: 1.0}\ncosts: {gpu_hour: {A100-SXM4-40GB: 0.5}, energy_kwh: 0.2}\n"
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	uncosted := filepath.Join(t.TempDir(), "uncosted.yaml") // a priced model without a cost
	for path, data := range map[string]string{book: good, bad: strings.Replace(good, "0.5", "-0.5", 1),
		uncosted: strings.Replace(good, "1.60}", "1.60, H100-SXM5-80GB: 2.40}", 1)} {
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	hour := []string{"--from", "2026-01-05T00:00:00Z", "--to", "2026-01-05T01:00:00Z"}
	tests := []struct {
		args []string
		code int
		want string
	}{
		// Nothing attributed: refused as the tenant report from stored minutes is (exit 1),
		// naming the first minute missing, never a report of no revenue.
		{[]string{"fleet", "--pricebook", book}, exitError, "60 of its 60 minutes are not attributed yet, the first 2026-01-05T00:00:00Z"},
		{[]string{"fleet", "--pricebook", book, "--format", "json", "--by", "gpu"}, exitError, "not attributed yet"},
		{[]string{"fleet", "--pricebook", bad}, exitUsage, `costs.gpu_hour.A100-SXM4-40GB: "-0.5"`},
		{[]string{"fleet", "--pricebook", uncosted}, exitUsage, "uncosted.yaml:5: costs.gpu_hour.H100-SXM5-80GB: missing"},
		{[]string{"fleet", "--pricebook", book, "--by", "rack"}, exitUsage, "model,node,gpu"},
		{[]string{"fleet", "--pricebook", book, "--fleet.max-tenants-per-host", "0"}, exitUsage, "--fleet.max-tenants-per-host 0"},
		{[]string{"fleet", "--pricebook", book, "--from", "2026-01-05T00:00:00Z", "--to", "2026-01-05T01:00:30Z"}, exitUsage, "whole minutes"},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		args := append(append([]string{}, tt.args...), "--clickhouse.dsn", db.DSN)
		if !strings.Contains(strings.Join(tt.args, " "), "--from") {
			args = append(args, hour...)
		}
		if got := run(args, &stdout, &stderr); got != tt.code || !strings.Contains(stdout.String()+stderr.String(), tt.want) {
			t.Errorf("slicemeter %v: exit %d, want %d with %q\n%s%s", tt.args, got, tt.code, tt.want, stdout.String(), stderr.String())
		}
	}
}

func TestFleetFlagsOptions(t *testing.T) {
	base := fleetFlags{From: "2026-01-05T00:00:00Z", To: "2026-01-05T01:00:00Z", By: "model", Format: "csv", Presence: time.Hour, TenantLimit: 5}
	tests := []struct {
		name string
		edit func(*fleetFlags)
		want string // in the usage error; "" none
	}{
		{"good", func(*fleetFlags) {}, ""},
		{"not a time", func(f *fleetFlags) { f.From = "yesterday" }, "--from"},
		{"not a whole minute", func(f *fleetFlags) { f.To = "2026-01-05T01:00:30Z" }, "whole minutes"},
		{"end before start", func(f *fleetFlags) { f.To = "2026-01-04T00:00:00Z" }, "--to"},
		{"short presence", func(f *fleetFlags) { f.Presence = time.Second }, "--attribution.presence"},
		{"no tenants", func(f *fleetFlags) { f.TenantLimit = 0 }, "--fleet.max-tenants-per-host 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := base
			tt.edit(&f)
			_, err := f.options(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC), slog.New(slog.DiscardHandler))
			switch {
			case tt.want == "" && err != nil:
				t.Fatal(err)
			case tt.want != "" && (err == nil || !usage.Is(err) || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("error %v: want a usage error naming %q", err, tt.want)
			}
		})
	}
}

// A --to after now is cut to the last minute the service can have attributed (now less its
// delay), and stderr says so, as the tenant report stops at now; a window that has not begun
// is refused naming --from.
func TestFleetStopsAtNow(t *testing.T) {
	now := time.Date(2026, 2, 1, 10, 20, 40, 123456789, time.UTC)
	for _, tt := range []struct {
		from, to string
		want     time.Time // the window's end; zero: refused
		logged   bool
	}{
		{"2026-02-01T09:00:00Z", "2026-02-01T10:00:00Z", time.Date(2026, 2, 1, 10, 0, 0, 0, time.UTC), false},
		{"2026-02-01T09:00:00Z", "2106-01-01T00:00:00Z", time.Date(2026, 2, 1, 10, 20, 0, 0, time.UTC), true},
		{"2026-02-01", "2026-02-02", time.Date(2026, 2, 1, 10, 20, 0, 0, time.UTC), true},
		{"2026-02-01T10:20:00Z", "2026-02-01T11:00:00Z", time.Time{}, false},
		{"2026-03-01", "2026-04-01", time.Time{}, false},
	} {
		var log bytes.Buffer
		f := fleetFlags{From: tt.from, To: tt.to, By: "model", Format: "csv", Presence: time.Hour, TenantLimit: 5}
		opts, err := f.options(now, slog.New(slog.NewTextHandler(&log, nil)))
		switch {
		case tt.want.IsZero():
			if err == nil || !usage.Is(err) || !strings.Contains(err.Error(), "--from "+tt.from[:10]) || !strings.Contains(err.Error(), "the window starts after 2026-02-01T10:20:00Z") {
				t.Errorf("%s..%s: %v, want a usage error naming --from", tt.from, tt.to, err)
			}
		case err != nil || !opts.To.Equal(tt.want):
			t.Errorf("%s..%s: window end %s (%v), want %s", tt.from, tt.to, opts.To, err, tt.want)
		case strings.Contains(log.String(), "--to is in the future") != tt.logged:
			t.Errorf("%s..%s: logged %q, want a line saying so: %v", tt.from, tt.to, log.String(), tt.logged)
		}
	}
}

// Through the binary, on a real ClickHouse: fleet over a window that ends in the future says
// where it stops on stderr and never asks for minutes after now (it exited 1 on them before);
// one that has not begun is exit 2.
func TestFleetCommandStopsAtNow(t *testing.T) {
	db := localtest.Database(t, localtest.DatabaseOptions{})
	book := filepath.Join(t.TempDir(), "prices.yaml")
	if err := os.WriteFile(book, []byte("version: 1\ncurrency: USD\nprices: {A100-SXM4-40GB: 1.60}\ntiers: {pro: 1.0}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	from := time.Now().UTC().Add(-time.Hour).Truncate(time.Minute).Format(time.RFC3339)
	var stdout, stderr bytes.Buffer
	run([]string{"fleet", "--pricebook", book, "--clickhouse.dsn", db.DSN, "--from", from, "--to", "2106-01-01"}, &stdout, &stderr)
	if out := stderr.String(); !strings.Contains(out, "--to is in the future: the fleet report stops at the last attributable minute") ||
		strings.Contains(out, "2106-01-01T00:00:00Z)") || regexp.MustCompile(`of its [0-9]{3,} minutes`).MatchString(out) {
		t.Errorf("fleet --to 2106-01-01: want the window cut at now, said on stderr:\n%s%s", stdout.String(), out)
	}
	stderr.Reset()
	if code := run([]string{"fleet", "--pricebook", book, "--clickhouse.dsn", db.DSN, "--from", "2106-01-01", "--to", "2106-01-02"}, &stdout, &stderr); code != exitUsage ||
		!strings.Contains(stderr.String(), "--from 2106-01-01T00:00:00Z: the window starts after") {
		t.Errorf("fleet over a window that has not begun: exit %d, want 2\n%s", code, stderr.String())
	}
}
