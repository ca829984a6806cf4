// Package spooltest holds what the spool's and the publisher's tests share: a small real
// filesystem to fill.
package spooltest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// MountTmpfs mounts a tmpfs of size (mount's syntax, "2m") under a temporary directory, or
// skips the test where it cannot be made (it needs root and CAP_SYS_ADMIN).
func MountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a %s tmpfs (needs root and CAP_SYS_ADMIN): %v: %s", size, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("unmounting %s: %v: %s", dir, err, out)
		}
	})
	return dir
}
