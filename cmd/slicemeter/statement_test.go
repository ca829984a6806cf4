//go:build !exporter_only

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/slicemeter/slicemeter/attribution/statement"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
)

// TestStatementCommand renders a statement through the binary on a real ClickHouse holding
// one allocation of acme and no samples (an open period billing nothing), as HTML on stdout
// and, with Chromium, as PDF; bad flags exit 2 naming them, and so does a PDF without
// Chromium, saying how to install it.
func TestStatementCommand(t *testing.T) {
	db := localtest.Database(t, localtest.DatabaseOptions{})
	importAllocations(t, db.DSN, "a1,acme,pro,node-a,gpu0,2026-02-03T00:00:00Z,2026-02-03T00:00:10Z,2026-02-03T01:00:00Z\n")
	slicemeter := func(code int, args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		args = append([]string{"statement", "--clickhouse.dsn", db.DSN, "--pricebook", "testdata/pricebook-berlin.yaml", "--tenant", "acme"}, args...)
		if got := run(args, &stdout, &stderr); got != code {
			t.Fatalf("slicemeter %v: exit %d, want %d\n%s%s", args, got, code, stdout.String(), stderr.String())
		}
		return stdout.String() + stderr.String()
	}
	page := slicemeter(exitOK, "--period", "2026-02")
	for _, want := range []string{"<h1>Statement of acme</h1>", `id="status">open`, `data-points="28"`, "Europe/Berlin"} {
		if !strings.Contains(page, want) {
			t.Errorf("the statement lacks %q:\n%.1500s", want, page)
		}
	}
	if out := slicemeter(exitUsage, "--period", "2026-13"); !strings.Contains(out, "--period") {
		t.Errorf("bad period: %s", out)
	}
	if out := slicemeter(exitUsage, "--period", "2026-02", "--format", "pdf"); !strings.Contains(out, "-o FILE") {
		t.Errorf("pdf without a file: %s", out)
	}
	t.Run("no Chromium", func(t *testing.T) {
		t.Setenv("PATH", "") // no chromium, chromium-browser nor google-chrome to find
		out := slicemeter(exitUsage, "--period", "2026-02", "--format", "pdf", "-o", filepath.Join(t.TempDir(), "acme.pdf"))
		if !strings.Contains(out, "needs headless Chromium") || !strings.Contains(out, statement.InstallHint) {
			t.Errorf("pdf without Chromium: %s", out)
		}
	})
	if _, err := statement.Chromium(); err != nil {
		t.Logf("no PDF checked: %v", err)
		return
	}
	pdf := filepath.Join(t.TempDir(), "acme.pdf")
	slicemeter(exitOK, "--period", "2026-02", "--format", "pdf", "-o", pdf)
	if b, err := os.ReadFile(pdf); err != nil || !bytes.HasPrefix(b, []byte("%PDF-")) {
		t.Errorf("the PDF: %v %.10q", err, b)
	}
}

// importAllocations imports the CSV rows (without header) through `slicemeter allocations import`.
func importAllocations(t *testing.T, dsn, rows string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "allocations.csv")
	if err := os.WriteFile(path, []byte("allocation_id,tenant,tier,node,instance_id,requested_at,started_at,ended_at\n"+rows), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"allocations", "import", "--clickhouse.dsn", dsn, path}, &stdout, &stderr); code != exitOK {
		t.Fatalf("allocations import: exit %d\n%s", code, stderr.String())
	}
}

// A statement of a tenant the period does not know (no allocation billed in it, no contract in
// the price book) is exit 2 naming the tenant, the period's tenants and how to list them: it
// was exit 0 with a statement of zeros. A tenant known by its contract alone gets its statement.
func TestStatementRefusesAnUnknownTenant(t *testing.T) {
	db := localtest.Database(t, localtest.DatabaseOptions{})
	importAllocations(t, db.DSN, "a1,acme,pro,node-a,gpu0,2026-02-03T00:00:00Z,2026-02-03T00:00:10Z,2026-02-03T01:00:00Z\n"+
		"a2,beta,pro,node-a,gpu1,2026-01-03T00:00:00Z,2026-01-03T00:00:10Z,2026-01-03T01:00:00Z\n")
	book := filepath.Join(t.TempDir(), "prices.yaml")
	if err := os.WriteFile(book, []byte("version: 1\ncurrency: EUR\nprices: {A100-SXM4-40GB: 1.50}\ntiers: {pro: 1.0}\n"+
		"contracts: {gamma: {A100-SXM4-40GB: 1.20}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		tenant string
		code   int
		want   string
	}{
		{"acme", exitOK, "<h1>Statement of acme</h1>"},
		{"gamma", exitOK, "<h1>Statement of gamma</h1>"},
		{"nobody", exitUsage, `--tenant "nobody": no allocation of this tenant is billed in 2026-02 and the price book has no contract for it; ` +
			"expected a tenant of the period (they are acme, gamma; slicemeter report --from 2026-02-01T00:00:00Z --to 2026-03-01T00:00:00Z lists them"},
		{"beta", exitUsage, `--tenant "beta": no allocation`}, // billed in January only
	} {
		var stdout, stderr bytes.Buffer
		args := []string{"statement", "--clickhouse.dsn", db.DSN, "--pricebook", book, "--tenant", tt.tenant, "--period", "2026-02"}
		if code := run(args, &stdout, &stderr); code != tt.code || !strings.Contains(stdout.String()+stderr.String(), tt.want) {
			t.Errorf("statement --tenant %s: exit %d, want %d and %q:\n%.600s%s", tt.tenant, code, tt.code, tt.want, stdout.String(), stderr.String())
		}
	}
}
