package pricebook

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

// The starter file that `pricebook example` prints loads, and check passes on it and lists
// what it bills how.
func TestExampleLoadsAndChecks(t *testing.T) {
	var out bytes.Buffer
	if err := Run(context.Background(), &Options{Sub: "example"}, nil, &out); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "prices.yaml")
	if err := os.WriteFile(path, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	book, err := pricebook.Load(path)
	if err != nil {
		t.Fatalf("the example does not load: %v", err)
	}
	if len(book.Prices) != 2 || len(book.Tiers) != 2 || book.ContractPrices() != 1 || len(book.Changes) != 1 || book.Costs == nil {
		t.Errorf("the example should show every section: %+v", book)
	}
	if !strings.Contains(out.String(), "# ") {
		t.Error("the example has no comments")
	}
	var checked bytes.Buffer
	if err := Run(context.Background(), &Options{Sub: "check", File: path}, nil, &checked); err != nil {
		t.Fatalf("check of the example: %v", err)
	}
	for _, want := range []string{
		path + ": ok: USD, 2 GPU models, 2 tiers, 1 contract prices, 1 effective-dated changes\n",
		"  A100-SXM4-40GB: list 1.6 USD/GPU-hour; at tier budget 1.12, pro 1.6\n",
		"  budget: × 0.7 (discount 30 %); cold start SLA 2m0s, no jitter SLA\n",
		"  pro: × 1 (discount 0 %); cold start SLA 30s, jitter p99 SLA 5ms\n",
		"  contract acme on A100-SXM4-40GB: 1.2 USD/GPU-hour (25 % off list)\n",
		"from 2026-03-01T00:00:00Z (2026-03-01 00:00 UTC):\n  list price H100-SXM5-80GB: 2.2 USD/GPU-hour\n  contract acme on A100-SXM4-40GB: 1.1 USD/GPU-hour\n",
		"  energy: 0.2 USD/kWh\n",
	} {
		if !strings.Contains(checked.String(), want) {
			t.Errorf("check output lacks %q:\n%s", want, checked.String())
		}
	}
}

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	for path, data := range map[string]string{
		good: "version: 1\ncurrency: EUR\ntimezone: Europe/Berlin\nprices: {A100-SXM4-40GB: 2}\ntiers: {pro: 1}\n",
		bad:  "version: 1\ncurrency: EUR\nprices: {A100-SXM4-40GB: -2}\ntiers: {pro: 1}\n",
	} {
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	fleetErr := errors.New("fleet has H100")
	for _, tc := range []struct {
		name  string
		f     Options
		fleet FleetCheck
		want  string // in the output, or the error
	}{
		{"zone", Options{Sub: "check", File: good}, nil, "billing periods: calendar months in Europe/Berlin\n"},
		{"bad file", Options{Sub: "check", File: bad}, nil, "prices.A100-SXM4-40GB"},
		{"fleet checked", Options{Sub: "check", File: good, DSN: "clickhouse://x"}, func(context.Context, string, *pricebook.PriceBook, time.Duration) error { return fleetErr }, "fleet has H100"},
		{"fleet ok", Options{Sub: "check", File: good, DSN: "clickhouse://x"}, func(context.Context, string, *pricebook.PriceBook, time.Duration) error { return nil }, "list 2 EUR/GPU-hour"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := Run(context.Background(), &tc.f, tc.fleet, &out)
			got := out.String()
			if err != nil {
				got = err.Error()
			}
			if !strings.Contains(got, tc.want) {
				t.Errorf("got %q, want it to hold %q", got, tc.want)
			}
		})
	}
}
