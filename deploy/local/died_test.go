package local

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Died says whether a server crashed (a signal of its own fault: the server's bug, which `make
// test` treats apart) or was killed or exited, with the mark the test harness prints for a
// crash only.
func TestDiedCrashed(t *testing.T) {
	for _, tc := range []struct {
		name    string
		argv    []string
		signal  syscall.Signal // sent to the child; 0: none, it exits by itself
		how     string
		crashed bool
	}{
		{"segfault", []string{"sleep", "60"}, syscall.SIGSEGV, "signal: segmentation fault", true},
		{"abort", []string{"sleep", "60"}, syscall.SIGABRT, "signal: aborted", true},
		{"bus error", []string{"sleep", "60"}, syscall.SIGBUS, "signal: bus error", true},
		{"killed", []string{"sleep", "60"}, syscall.SIGKILL, "signal: killed", false},
		{"terminated", []string{"sleep", "60"}, syscall.SIGTERM, "signal: terminated", false},
		{"exit status", []string{"sh", "-c", "exit 3"}, 0, "exit status 3", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "out.log")
			if err := os.WriteFile(out, []byte("the server's last words\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			p, err := startProcess("Sleeper", dir, out, tc.argv...)
			if err != nil {
				t.Fatal(err)
			}
			s := &service{name: "Sleeper", dir: dir, logs: func() []string { return []string{out} }, proc: p}
			if tc.signal != 0 {
				if err := s.Died(); err != nil {
					t.Errorf("Died() = %v while running", err)
				}
				if err := syscall.Kill(p.pid(), tc.signal); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case <-p.done:
			case <-time.After(10 * time.Second):
				t.Fatal("the child did not exit")
			}
			err = s.Died()
			var died *DiedError
			if !errors.As(err, &died) {
				t.Fatalf("Died() = %v, want a *DiedError", err)
			}
			if !strings.HasPrefix(died.How, tc.how) || died.Crashed != tc.crashed {
				t.Errorf("How, Crashed = %q, %v; want %q…, %v", died.How, died.Crashed, tc.how, tc.crashed)
			}
			if !strings.Contains(err.Error(), "the server's last words") || !strings.Contains(err.Error(), tc.how) {
				t.Errorf("Died() = %q, want how it ended and its log's tail", err)
			}
			mark := died.Mark()
			if tc.crashed != strings.HasPrefix(mark, CrashMarker) || tc.crashed && !strings.Contains(mark, tc.how) {
				t.Errorf("Mark() = %q (crashed %v)", mark, tc.crashed)
			}
			// Stop reports the same death, and the service is then stopped.
			if err := s.Stop(); !errors.As(err, &died) {
				t.Errorf("Stop() after the death = %v, want a *DiedError", err)
			}
			if err := s.Died(); err != nil {
				t.Errorf("Died() after Stop = %v", err)
			}
		})
	}
}
