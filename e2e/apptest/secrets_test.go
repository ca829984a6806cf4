package apptest

import (
	"os"
	"strings"
	"testing"
)

// TestScanSecrets: a registered secret in a kept output is found, named by file, line and
// the test that registered it, never quoted; output without it is clean; a secret too short
// to mean anything is refused.
func TestScanSecrets(t *testing.T) {
	saved := captured.secrets
	captured.mu.Lock()
	captured.secrets = nil
	captured.mu.Unlock()
	t.Cleanup(func() {
		captured.mu.Lock()
		captured.secrets = saved
		if captured.dir != "" {
			_ = os.RemoveAll(captured.dir)
			captured.dir, captured.n = "", 0
		}
		captured.mu.Unlock()
	})
	const token = "tok-0123456789abcdef"
	keepOutput(t, "clean.stderr", "level=INFO msg=started\n")
	if findings, err := scanSecrets(); err != nil || len(findings) != 0 {
		t.Fatalf("no secret registered: %v, %v", findings, err)
	}
	Secret(t, token)
	if findings, err := scanSecrets(); err != nil || len(findings) != 0 {
		t.Fatalf("clean output: %v, %v", findings, err)
	}
	keepOutput(t, "leak.log", "line one\nlevel=ERROR msg=refused token="+token+"\n")
	findings, err := scanSecrets()
	if err != nil || len(findings) != 1 {
		t.Fatalf("findings %v, %v; want one", findings, err)
	}
	if f := findings[0]; !strings.Contains(f, "leak.log:2 ") || !strings.Contains(f, "TestScanSecrets") || strings.Contains(f, token) {
		t.Errorf("finding %q: want the file and line 2 and the test named, never the secret", f)
	}
	short := &testing.T{}
	func() {
		defer func() { _ = recover() }() // t.Fatalf of a bare testing.T ends the goroutine
		done := make(chan struct{})
		go func() { defer close(done); Secret(short, "abc") }()
		<-done
	}()
	if !short.Failed() {
		t.Error("a 3-character secret was taken")
	}
}
