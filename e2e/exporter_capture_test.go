package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/e2e/apptest"
)

// The binary records the simulated NVML of a node and replays the capture to the same figures;
// a corrupt capture is refused with exit status 2 and the offset.
func TestExporterRecordAndReplay(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	capture, live, replayed := filepath.Join(dir, "node.capture"), filepath.Join(dir, "live.json"), filepath.Join(dir, "replay.json")
	r := apptest.Run(t, ctx, "exporter", "--source", "sim", "--scenario", "../exporter/capture/testdata/node.yaml", "--sim.fast",
		"--record", capture, "--summary", live, "--web.listen-address", "")
	if r.Code != 0 {
		t.Fatalf("recording: exit %d\n%s", r.Code, r.Stderr)
	}
	r = apptest.Run(t, ctx, "exporter", "--source", "replay", "--replay", capture, "--replay.fast", "--summary", replayed, "--web.listen-address", "")
	if r.Code != 0 {
		t.Fatalf("replaying: exit %d\n%s", r.Code, r.Stderr)
	}
	a, err := os.ReadFile(live)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(replayed)
	if err != nil {
		t.Fatal(err)
	}
	// The loop's tick times differ by one interval (the simulator's NVML is read at the end of its
	// tick, a capture's ticks are those reads); the figures must not.
	figures := func(b []byte) string {
		var keep []string
		for _, l := range strings.Split(string(b), "\n") {
			if !strings.Contains(l, `"first_tick"`) && !strings.Contains(l, `"last_tick"`) {
				keep = append(keep, l)
			}
		}
		return strings.Join(keep, "\n")
	}
	if figures(a) != figures(b) || !strings.Contains(string(a), `"samples": 180`) {
		t.Errorf("replay summary differs from the live one:\n%s\n---\n%s", a, b)
	}

	data, err := os.ReadFile(capture)
	if err != nil {
		t.Fatal(err)
	}
	corrupt := filepath.Join(dir, "corrupt.capture")
	if err := os.WriteFile(corrupt, data[:len(data)*2/3], 0o644); err != nil {
		t.Fatal(err)
	}
	r = apptest.Run(t, ctx, "exporter", "--source", "replay", "--replay", corrupt, "--web.listen-address", "")
	if r.Code != 2 || !strings.Contains(r.Stderr, corrupt) || !strings.Contains(r.Stderr, "offset") {
		t.Errorf("corrupt capture: exit %d, want 2 and an error naming the file and the offset\n%s", r.Code, r.Stderr)
	}
	// Without a GPU driver the nvml source explains itself and points at the simulator.
	if _, err := os.Stat("/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"); os.IsNotExist(err) {
		r = apptest.Run(t, ctx, "exporter", "--source", "nvml", "--nvml.library", filepath.Join(dir, "libnvidia-ml.so.1"), "--web.listen-address", "")
		if r.Code == 0 || !strings.Contains(r.Stderr, "--source sim") {
			t.Errorf("NVML absent: exit %d, want an error suggesting --source sim\n%s", r.Code, r.Stderr)
		}
	}
}
