package kubernetes

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// Two pods holding replicas of one time-sliced MIG device (MIG-<uuid>::0 and ::1) both map to
// the MIG instance: the first to start is published, the other refused (dead-lettered with
// reason overlap, counted under instance_id, logged) and never billed, also once the first
// ends.
func TestDiscoveryRefusesSharedMIG(t *testing.T) {
	ctx := context.Background()
	first := runningPod("team-a", "first", uidA, nil, "main", cidA, t0)
	second := runningPod("team-b", "second", uidB, nil, "main", strings.Repeat("b", 64), t0.Add(time.Minute))
	f := newFixture(t, first, second)
	f.kubelet.Set([]*podresourcesv1.PodResources{
		podRes("team-a", "first", map[string]map[string][]string{"main": {"nvidia.com/mig-1g.10gb": {migA + "::0"}}}),
		podRes("team-b", "second", map[string]map[string][]string{"main": {"nvidia.com/mig-1g.10gb": {migA + "::1"}}}),
	})
	reg := prometheus.NewPedanticRegistry()
	var logs syncBuffer
	f.logger = slog.New(slog.NewTextHandler(&logs, nil))
	d := f.start(reg)
	d.Refresh(ctx, t0.Add(tHour))
	msgs := f.out.take()
	if got := events(t, msgs, pb.TopicAllocations); len(got) != 1 || got[0].AllocationId != "k8s/"+uidA+"/main/"+migA+"::0" || got[0].InstanceId != migA {
		t.Fatalf("published %v; want only the first pod's allocation of %s", got, migA)
	}
	dead := events(t, msgs, pb.TopicDeadLetter)
	if len(dead) != 1 || dead[0].AllocationId != "k8s/"+uidB+"/main/"+migA+"::1" {
		t.Fatalf("dead-lettered %v; want the second pod's allocation", dead)
	}
	for _, m := range msgs {
		if m.Topic == pb.TopicDeadLetter && (header(m, headerReason) != reasonOverlap || header(m, headerField) != fieldInstance ||
			!strings.Contains(header(m, headerReasonDetail), "k8s/"+uidA)) {
			t.Errorf("dead letter headers %v: want reason overlap, field instance_id and a detail naming the holder", m.Headers)
		}
	}
	if n := testutil.ToFloat64(d.metrics.refused.WithLabelValues(fieldInstance)); n != 1 {
		t.Errorf("refused{field=instance_id} = %v, want 1", n)
	}
	if !strings.Contains(logs.String(), "reason=overlap") || !strings.Contains(logs.String(), "namespace=team-b") {
		t.Errorf("the refusal is not logged with its pod:\n%s", logs.String())
	}
	d.Refresh(ctx, t0.Add(tHour+time.Minute)) // refused once, not again until it changes
	if m := f.out.take(); len(m) != 0 {
		t.Errorf("second refresh sent %d messages, want none", len(m))
	}

	// The first pod finishes; the second still overlapped it, and stays refused.
	first = first.DeepCopy()
	first.Status = succeeded(first.Status, t0, t0.Add(2*tHour))
	if _, err := f.client.CoreV1().Pods("team-a").UpdateStatus(ctx, first, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first pod's end in the informer", func() bool { return d.pods.List()[uidA].Status.Phase == corev1.PodSucceeded })
	d.Refresh(ctx, t0.Add(2*tHour+time.Minute))
	msgs = f.out.take()
	if got := events(t, msgs, pb.TopicAllocations); len(got) != 1 || got[0].AllocationId != "k8s/"+uidA+"/main/"+migA+"::0" || got[0].EndedAtNs != t0.Add(2*tHour).UnixNano() {
		t.Errorf("after the first pod's end published %v; want its end only", got)
	}
	if dead := events(t, msgs, pb.TopicDeadLetter); len(dead) != 0 {
		t.Errorf("dead-lettered %v again; the second pod's allocation did not change", dead)
	}
}

// Before the kubelet was ever read, no GPU is shared (the nvml source samples it whole: no
// per-pod split) and the discovery says why; the socket's absence is logged once a minute
// however often the refresh retries.
func TestDiscoveryKubeletMissing(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, runningPod("team-a", "notebook", uidA, nil, "main", cidA, t0))
	f.flags.Socket = filepath.Join(f.dir, "absent.sock")
	var logs syncBuffer
	f.logger = slog.New(slog.NewTextHandler(&logs, nil))
	reg := prometheus.NewPedanticRegistry()
	d := f.start(reg)
	for i := 0; i < 12; i++ { // every 10 s for two minutes
		d.Refresh(ctx, t0.Add(time.Duration(i)*10*time.Second))
	}
	if s := d.Shares().Share(gpuA); s.Replicas != 0 {
		t.Errorf("Share(%s) = %+v before any kubelet answer; want unshared (whole-GPU samples)", gpuA, s)
	}
	if m := d.Missing(); len(m) != 1 || !strings.Contains(m[0], "absent.sock") {
		t.Errorf("Missing = %q; want the kubelet socket named", m)
	}
	if n := testutil.ToFloat64(d.metrics.up.WithLabelValues("kubelet")); n != 0 {
		t.Errorf("up{source=kubelet} = %v, want 0", n)
	}
	if n := strings.Count(logs.String(), "reason=kubelet"); n != 2 {
		t.Errorf("the missing socket logged %d times over 12 refreshes in 110 s, want 2 (once a minute):\n%s", n, logs.String())
	}
}

// succeeded is st with its one container terminated: run from started to finished.
func succeeded(st corev1.PodStatus, started, finished time.Time) corev1.PodStatus {
	st = *st.DeepCopy()
	st.Phase = corev1.PodSucceeded
	c := &st.ContainerStatuses[0]
	c.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{StartedAt: metav1.NewTime(started), FinishedAt: metav1.NewTime(finished)}}
	return st
}

// syncBuffer is a bytes.Buffer the informer's goroutines and the test may share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A device id that maps to no instance is counted at every refresh that lists it and named in
// the log once, however many refreshes list it.
func TestDiscoveryUnmappedNamedOnce(t *testing.T) {
	ctx := context.Background()
	const bad = "MIG-GPU-11111111-2222-3333-4444-555555555555/1/0" // the pre-R470 form
	f := newFixture(t, runningPod("team-a", "train", uidA, nil, "main", cidA, t0))
	f.kubelet.Set([]*podresourcesv1.PodResources{podRes("team-a", "train", map[string]map[string][]string{"main": {"nvidia.com/gpu": {bad}}})})
	var logs syncBuffer
	f.logger = slog.New(slog.NewTextHandler(&logs, nil))
	d := f.start(nil)
	for i := range 3 {
		d.Refresh(ctx, t0.Add(time.Duration(i)*10*time.Minute)) // minutes apart: no rate limit hides a second line
	}
	if n := testutil.ToFloat64(d.metrics.unmapped); n != 3 {
		t.Errorf("unmapped_devices_total = %v after 3 refreshes, want 3", n)
	}
	if n := strings.Count(logs.String(), bad); n != 1 {
		t.Errorf("the unmapped id named %d times in the log, want once:\n%s", n, logs.String())
	}
}
