package kubernetes

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// Save syncs the new file before the rename makes it the state, and the directory after, so
// that a crash (a node's power cut) leaves the old state or the new one, never an empty file.
func TestSaveSyncs(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, StateFile)
	old := State{LastSeen: t0, Sent: map[string]*Sent{}}
	if err := old.Save(path); err != nil {
		t.Fatal(err)
	}
	oldText, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	st := State{LastSeen: t0.Add(time.Hour), Sent: map[string]*Sent{"k8s/x/main/" + gpuA: {Version: 1}}}
	var synced []string
	sync := func(f *os.File) error {
		cur, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		switch f.Name() {
		case dir:
			if string(cur) == string(oldText) {
				t.Error("the directory synced before the rename")
			}
			synced = append(synced, "dir")
		default:
			if filepath.Dir(f.Name()) != dir || f.Name() == path {
				t.Errorf("synced %s, want a temporary file in %s", f.Name(), dir)
			}
			if string(cur) != string(oldText) {
				t.Error("the new file synced after the rename")
			}
			synced = append(synced, "file")
		}
		return f.Sync()
	}
	if err := st.save(path, sync); err != nil {
		t.Fatal(err)
	}
	if strings.Join(synced, ",") != "file,dir" {
		t.Errorf("synced %v, want the new file, then the directory", synced)
	}
	got, err := LoadState(path)
	if err != nil || !got.LastSeen.Equal(st.LastSeen) || len(got.Sent) != 1 {
		t.Errorf("LoadState after Save = %+v, %v; want %+v", got, err, st)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".kubernetes-state-*"))
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// A sync that fails fails Save and leaves the old state in place.
func TestSaveSyncFails(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, StateFile)
	if err := (State{LastSeen: t0, Sent: map[string]*Sent{}}).Save(path); err != nil {
		t.Fatal(err)
	}
	failFile := func(f *os.File) error {
		if f.Name() == dir {
			return nil
		}
		return os.ErrInvalid
	}
	if err := (State{LastSeen: t0.Add(time.Hour)}).save(path, failFile); err == nil {
		t.Error("Save with a failing sync: no error")
	}
	if got, err := LoadState(path); err != nil || !got.LastSeen.Equal(t0) {
		t.Errorf("state after a failed Save = %+v, %v; want the old one (last seen %s)", got, err, t0)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".kubernetes-state-*"))
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// A corrupt or empty state file (a crash of an older exporter, a full disk) does not stop the
// exporter: it is moved aside, named once in the log with the parse error, counted, and the
// discovery starts empty (a restart without a state: replays, which the collector stores
// nothing for).
func TestDiscoveryCorruptState(t *testing.T) {
	for _, tc := range []struct{ name, text string }{
		{"empty", ""},
		{"truncated", `{"last_seen":"2026-03-02T09:00:00Z","sent":{"k8s/`},
		{"not json", "\x00\x00\x00\x00"},
		{"wrong type", `{"sent":[1,2]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t, runningPod("team-a", "train", uidA, nil, "main", cidA, t0))
			f.kubelet.Set([]*podresourcesv1.PodResources{podRes("team-a", "train", map[string]map[string][]string{"main": {"nvidia.com/gpu": {gpuA}}})})
			path := filepath.Join(f.dir, StateFile)
			if err := os.WriteFile(path, []byte(tc.text), 0o600); err != nil {
				t.Fatal(err)
			}
			var logs syncBuffer
			f.logger = slog.New(slog.NewTextHandler(&logs, nil))
			reg := prometheus.NewPedanticRegistry()
			d := f.start(reg)

			aside, _ := filepath.Glob(path + ".corrupt-*")
			if len(aside) != 1 {
				t.Fatalf("moved aside: %v; want one %s.corrupt-<time>", aside, path)
			}
			if b, err := os.ReadFile(aside[0]); err != nil || string(b) != tc.text {
				t.Errorf("the file moved aside holds %q, %v; want the corrupt state %q", b, err, tc.text)
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Errorf("the corrupt state is still at %s: %v", path, err)
			}
			if n := testutil.ToFloat64(d.metrics.corruptState); n != 1 {
				t.Errorf("state_corrupt_total = %v, want 1", n)
			}
			log := logs.String()
			if strings.Count(log, "corrupt") == 0 || !strings.Contains(log, path) || !strings.Contains(log, aside[0]) {
				t.Errorf("the log does not name the corrupt state %s and where it went %s:\n%s", path, aside[0], log)
			}

			// It starts empty: the pod's allocation is published and a valid state saved.
			d.Refresh(ctx, t0.Add(tHour))
			if got := events(t, f.out.take(), pb.TopicAllocations); len(got) != 1 || got[0].Version != 1 {
				t.Errorf("published %v, want the running pod's allocation", got)
			}
			if st, err := LoadState(path); err != nil || len(st.Sent) != 1 {
				t.Errorf("state after the refresh: %v, %v; want the allocation", st.Sent, err)
			}
			if n := strings.Count(logs.String(), "corrupt"); n != strings.Count(log, "corrupt") {
				t.Errorf("the refresh logged the corrupt state again:\n%s", logs.String())
			}
		})
	}
}

// A state that cannot be read at all (not its content: a directory in its place) is still an
// error: moving it aside would not help.
func TestDiscoveryStateUnreadable(t *testing.T) {
	f := newFixture(t)
	if err := os.Mkdir(filepath.Join(f.dir, StateFile), 0o700); err != nil {
		t.Fatal(err)
	}
	kub, err := DialPodResources(f.flags.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer kub.Close()
	if _, err := New(Config{Flags: f.flags, Client: f.client.CoreV1().Pods(metav1.NamespaceAll), Kubelet: kub, Writer: f.out, Logger: discardLogger()}); err == nil ||
		!strings.Contains(err.Error(), StateFile) {
		t.Errorf("New over a directory as the state: %v; want an error naming it", err)
	}
}
