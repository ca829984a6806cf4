package main

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The exporter's flag combinations: bad ones exit 2 with a message naming the flag.
func TestExporterFlags(t *testing.T) {
	dir := t.TempDir()
	multi := "../../schemas/scenario/testdata/mig-basic.yaml"
	capture := "../../exporter/capture/testdata/node.capture"
	tests := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"unknown source", []string{"--source", "dcgm"}, exitUsage, []string{`--source "dcgm"`, "nvml, sim or replay"}},
		{"replay without a file", []string{"--source", "replay"}, exitUsage, []string{"--replay FILE is required"}},
		{"replay of a missing file", []string{"--source", "replay", "--replay", filepath.Join(dir, "none")}, exitUsage, []string{"none"}},
		{"recording a replay", []string{"--source", "replay", "--replay", capture, "--record", filepath.Join(dir, "x")}, exitUsage, []string{"--record"}},
		{"recording an outage scenario", []string{"--scenario", "../../schemas/scenario/testdata/outage-coldstart.yaml", "--record", filepath.Join(dir, "y")}, exitUsage, []string{"one node without outages"}},
		{"nvml with a zero interval", []string{"--source", "nvml", "--interval", "0s"}, exitUsage, []string{"--interval"}},
		{"spool too small", []string{"--scenario", multi, "--kafka.brokers", "127.0.0.1:1", "--spool.dir", dir, "--spool.max-bytes", "10"}, exitUsage, []string{"--spool.dir", "size limit 10 bytes"}},
		{"memory queue too small", []string{"--scenario", multi, "--kafka.brokers", "127.0.0.1:1", "--queue.max-bytes", "10"}, exitUsage, []string{"--queue.max-bytes", "size limit 10 bytes"}},
		{"bad --sim.start", []string{"--scenario", multi, "--sim.start", "soon"}, exitUsage, []string{`--sim.start "soon"`}},
		{"negative --runtime.gomaxprocs", []string{"--scenario", multi, "--runtime.gomaxprocs=-1"}, exitUsage, []string{"--runtime.gomaxprocs: -1 is negative"}},
		// Production default: a bare exporter samples this node's GPUs (here: no driver), it does
		// not ask for a scenario.
		{"bare exporter samples NVML", []string{"--nvml.library", filepath.Join(dir, "libnvidia-ml.so.1")}, exitError, []string{"--source nvml", "libnvidia-ml.so.1"}},
		{"scenario and capture without --source", []string{"--scenario", multi, "--replay", capture}, exitUsage, []string{"--scenario and --replay without --source"}},
		{"replay runs", []string{"--source", "replay", "--replay", capture, "--replay.fast", "--summary", filepath.Join(dir, "s.json")}, exitOK, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"exporter", "--web.listen-address="}, tc.args...)
			if code := run(args, &stdout, &stderr); code != tc.code {
				t.Fatalf("exit %d, want %d\n%s", code, tc.code, stderr.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr does not name %q:\n%s", w, stderr.String())
				}
			}
		})
	}
	if b, err := os.ReadFile(filepath.Join(dir, "s.json")); err != nil || !strings.Contains(string(b), `"samples": 180`) {
		t.Errorf("replay summary: %v\n%s", err, b)
	}
}

// --runtime.gomaxprocs: 1 by default, what is given when given, Go's default with 0, and an
// operator's GOMAXPROCS variable kept unless the flag is given.
func TestExporterGOMAXPROCS(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(before)
	for _, tc := range []struct {
		name  string
		procs int
		set   bool
		env   string
		want  int
	}{
		{"default", 1, false, "", 1},
		{"given", 3, true, "", 3},
		{"given over the variable", 2, true, "4", 2},
		{"the variable kept", 1, false, "4", 5},
		{"zero: Go's default", 0, true, "", 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runtime.GOMAXPROCS(5) // as the runtime set it at start
			e := &exporterCmd{maxProcs: tc.procs, maxProcsSet: tc.set}
			if err := e.setMaxProcs(tc.env); err != nil {
				t.Fatal(err)
			}
			if got := runtime.GOMAXPROCS(0); got != tc.want {
				t.Errorf("GOMAXPROCS %d, want %d", got, tc.want)
			}
		})
	}
}
