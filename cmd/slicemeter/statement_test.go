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

// TestStatementCommand renders a statement through the binary on a real, empty ClickHouse
// (an open period billing nothing), as HTML on stdout and, with Chromium, as PDF; bad flags
// exit 2 naming them, and so does a PDF without Chromium, saying how to install it.
func TestStatementCommand(t *testing.T) {
	db := localtest.Database(t, localtest.DatabaseOptions{})
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
