package statement

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/slicemeter/slicemeter/internal/usage"
)

// ChromiumNames are the names headless Chromium is found under, in order.
var ChromiumNames = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// InstallHint says how to get Chromium where it is missing.
const InstallHint = "install Chromium (Debian/Ubuntu: apt-get install chromium; or deploy/local/install-deps.sh) or use --format html and print the page from a browser"

// ErrNoChromium is returned (a usage error) when no Chromium is installed.
var ErrNoChromium = usage.Errorf("--format pdf needs headless Chromium, and none of %v is on PATH: %s", ChromiumNames, InstallHint)

// Chromium is the path of the installed Chromium, or ErrNoChromium.
func Chromium() (string, error) {
	for _, name := range ChromiumNames {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", ErrNoChromium
}

// Headless runs Chromium headless on the page file with args (e.g. --print-to-pdf=F) and
// returns what it printed. The sandbox is off: it only ever opens our own page, and Chromium
// refuses to start sandboxed as root (containers, CI).
func Headless(ctx context.Context, page string, args ...string) ([]byte, error) {
	out, _, err := headless(ctx, page, args...)
	return out, err
}

// headless is Headless, with what Chromium logged (its console messages with
// --enable-logging=stderr).
func headless(ctx context.Context, page string, args ...string) (stdout, stderr []byte, err error) {
	bin, err := Chromium()
	if err != nil {
		return nil, nil, err
	}
	abs, err := filepath.Abs(page)
	if err != nil {
		return nil, nil, fmt.Errorf("headless Chromium: %w", err)
	}
	profile, err := os.MkdirTemp("", "slicemeter-chromium-")
	if err != nil {
		return nil, nil, fmt.Errorf("headless Chromium: a profile directory: %w", err)
	}
	defer os.RemoveAll(profile)
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
		"--disable-extensions", "--disable-background-networking", "--user-data-dir=" + profile}, args...)
	cmd := exec.CommandContext(ctx, bin, append(all, "file://"+abs)...)
	var out, log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &log
	if err := cmd.Run(); err != nil {
		return out.Bytes(), log.Bytes(), fmt.Errorf("headless Chromium on %s: %w: %s", page, err, lastLines(log.Bytes(), 5))
	}
	return out.Bytes(), log.Bytes(), nil
}

// lastLines are the last n lines of b (Chromium's stderr is long and mostly D-Bus noise).
func lastLines(b []byte, n int) []byte {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	return bytes.Join(lines[max(0, len(lines)-n):], []byte("\n"))
}

// PDF prints the page file to the PDF file out on A4 (the page's print stylesheet).
func PDF(ctx context.Context, page, out string) error {
	abs, err := filepath.Abs(out)
	if err != nil {
		return fmt.Errorf("print %s to PDF: %w", page, err)
	}
	if _, err := Headless(ctx, page, "--no-pdf-header-footer", "--print-to-pdf="+abs); err != nil {
		return err
	}
	if fi, err := os.Stat(abs); err != nil || fi.Size() == 0 {
		return fmt.Errorf("print %s to PDF: Chromium wrote no %s", page, abs)
	}
	return nil
}
