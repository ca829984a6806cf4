//go:build !exporter_only

package main

import (
	"bytes"
	"strings"
	"testing"
)

// Help that is asked for goes to stdout with exit 0, so that `slicemeter --help | less` works;
// no command at all is a usage error: the usage on stderr, exit 2.
func TestHelpGoesToStdout(t *testing.T) {
	tests := []struct {
		args       []string
		code       int
		stdout     string // what stdout holds; stderr must be empty
		stderrWant string // with an empty stdout: what stderr holds
	}{
		{[]string{"--help"}, exitOK, "Commands:", ""},
		{[]string{"-h"}, exitOK, "Commands:", ""},
		{[]string{"help"}, exitOK, "Commands:", ""},
		{[]string{"help", "report"}, exitOK, "--from=FROM", ""},
		{[]string{"report", "--help"}, exitOK, "--from=FROM", ""},
		{[]string{"api", "token", "hash", "-h"}, exitOK, "usage: slicemeter api token hash", ""},
		{nil, exitUsage, "", "expected a command"},
		{[]string{"--log.level", "debug"}, exitUsage, "", "expected a command"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tt.args, &stdout, &stderr)
			if code != tt.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, stdout.String(), stderr.String())
			}
			if tt.stdout != "" {
				if !strings.Contains(stdout.String(), tt.stdout) || stderr.Len() > 0 {
					t.Errorf("want %q on stdout and nothing on stderr\nstdout:\n%s\nstderr:\n%s", tt.stdout, stdout.String(), stderr.String())
				}
				return
			}
			if stdout.Len() > 0 || !strings.Contains(stderr.String(), tt.stderrWant) || !strings.Contains(stderr.String(), "Commands:") {
				t.Errorf("want the usage and %q on stderr and nothing on stdout\nstdout:\n%s\nstderr:\n%s", tt.stderrWant, stdout.String(), stderr.String())
			}
		})
	}
}
