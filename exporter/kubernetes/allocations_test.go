package kubernetes

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestChanges(t *testing.T) {
	h := Holding{PodUID: uidA, Namespace: "team-a", Pod: "train", Container: "main", Device: gpuA, Instance: gpuA, Kind: "gpu", GPU: gpuA}
	id := h.AllocationID()
	l := Labels{DefaultTier: "pro"}
	running := runningPod("team-a", "train", uidA, nil, "main", cidA, t0)
	restarted := running.DeepCopy() // the status shows only the latest start
	restarted.Status.ContainerStatuses[0].State.Running.StartedAt = metav1.NewTime(t0.Add(time.Hour))
	succeeded := running.DeepCopy()
	succeeded.Status.Phase = corev1.PodSucceeded
	finished := running.DeepCopy()
	finished.Status.Phase = corev1.PodFailed
	finished.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		StartedAt: metav1.NewTime(t0), FinishedAt: metav1.NewTime(t0)}} // under a second
	pending := running.DeepCopy()
	pending.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	now := t0.Add(2 * time.Hour)
	lastSeen := t0.Add(90 * time.Minute)

	want, _ := Want(h, running, nil, node, l, now)
	sentRunning := &Sent{Holding: h, Allocation: want, Version: 1}
	ended := want
	ended.EndedAt = lastSeen
	sentEnded := &Sent{Holding: h, Allocation: ended, Version: 2}

	for _, tc := range []struct {
		name    string
		sent    *Sent
		pod     *corev1.Pod
		gone    *Gone
		version uint64 // 0: no event
		ended   time.Time
	}{
		{name: "new running", pod: running, version: 1},
		{name: "not started yet", pod: pending},
		{name: "running, sent", sent: sentRunning, pod: running},
		{name: "restarted container keeps its first start", sent: sentRunning, pod: restarted},
		{name: "succeeded without a finish time ends now", sent: sentRunning, pod: succeeded, version: 2, ended: now},
		{name: "ended is final", sent: sentEnded, pod: succeeded},
		{name: "ran under a second: one second", pod: finished, version: 2, ended: t0.Add(time.Second)},
		{name: "deleted while watched", sent: sentRunning, gone: &Gone{Pod: running, At: now.Add(-time.Minute)}, version: 2, ended: now.Add(-time.Minute)},
		{name: "deleted while down: ended at the last refresh that saw it", sent: sentRunning, version: 2, ended: lastSeen},
		{name: "deleted while down, never sent", version: 0},
	} {
		sent := map[string]*Sent{}
		if tc.sent != nil {
			sent[id] = tc.sent
		}
		pods := map[string]*corev1.Pod{}
		if tc.pod != nil {
			pods[uidA] = tc.pod
		}
		gone := map[string]*Gone{}
		if tc.gone != nil {
			gone[uidA] = tc.gone
		}
		ev := Changes(map[string]Holding{id: h}, sent, pods, gone, lastSeen, node, l, now)
		if tc.version == 0 {
			if len(ev) != 0 {
				t.Errorf("%s: events %+v, want none", tc.name, ev)
			}
			continue
		}
		if len(ev) != 1 || ev[0].Version != tc.version || !ev[0].Allocation.EndedAt.Equal(tc.ended) || !ev[0].Allocation.StartedAt.Equal(t0) ||
			ev[0].Allocation.Tenant != "team-a" || ev[0].Allocation.Tier != "pro" || ev[0].Allocation.ID != id {
			t.Errorf("%s: events %+v; want version %d ended %s started %s", tc.name, ev, tc.version, tc.ended, t0)
		}
	}
}

// Init containers: a restartable one (a sidecar, which the kubelet lists with its devices) is
// billed like any container, from its start to the pod's end; a classic one that completed is
// done while its pod runs on, and ends at its finish.
func TestWantInitContainers(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	withInit := func(name string, restart *corev1.ContainerRestartPolicy, state corev1.ContainerState) *corev1.Pod {
		p := runningPod("team-a", "train", uidA, nil, "main", cidA, t0.Add(time.Minute))
		p.CreationTimestamp = metav1.NewTime(t0.Add(-30 * time.Second))
		p.Spec.InitContainers = []corev1.Container{{Name: name, RestartPolicy: restart}}
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: name, ContainerID: "containerd://" + strings.Repeat("c", 64), State: state}}
		return p
	}
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(t0)}}
	completed := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, StartedAt: metav1.NewTime(t0), FinishedAt: metav1.NewTime(t0.Add(40 * time.Second))}}
	failed := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, StartedAt: metav1.NewTime(t0), FinishedAt: metav1.NewTime(t0.Add(40 * time.Second))}}
	sidecar := withInit("proxy", &always, running)
	sidecarDone := sidecar.DeepCopy()
	sidecarDone.Status.Phase = corev1.PodSucceeded
	sidecarDone.Status.InitContainerStatuses[0].State = completed
	sidecarStopped := withInit("proxy", &always, completed) // stopped, the pod runs on: restarted by the kubelet
	now := t0.Add(time.Hour)

	for _, tc := range []struct {
		name      string
		container string
		pod       *corev1.Pod
		gone      *Gone
		ok        bool
		ended     time.Time
	}{
		{name: "sidecar running", container: "proxy", pod: sidecar, ok: true},
		{name: "sidecar stopped while the pod runs: restarted, not ended", container: "proxy", pod: sidecarStopped, ok: true},
		{name: "sidecar at the pod's end", container: "proxy", pod: sidecarDone, ok: true, ended: t0.Add(40 * time.Second)},
		{name: "sidecar's pod deleted", container: "proxy", gone: &Gone{Pod: sidecar, At: now}, ok: true, ended: now},
		{name: "init container running", container: "setup", pod: withInit("setup", nil, running), ok: true},
		{name: "init container completed: ends at its finish", container: "setup", pod: withInit("setup", nil, completed), ok: true, ended: t0.Add(40 * time.Second)},
		{name: "init container failed: run again, not ended", container: "setup", pod: withInit("setup", nil, failed), ok: true},
		{name: "init container waiting", container: "setup", pod: withInit("setup", nil, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}})},
		{name: "main container of the same pod", container: "main", pod: withInit("setup", nil, completed), ok: true},
	} {
		h := Holding{PodUID: uidA, Namespace: "team-a", Pod: "train", Container: tc.container, Device: gpuA, Instance: gpuA, Kind: "gpu", GPU: gpuA}
		a, ok := Want(h, tc.pod, tc.gone, node, Labels{DefaultTier: "pro"}, now)
		wantStart := t0
		if tc.container == "main" {
			wantStart = t0.Add(time.Minute)
		}
		if ok != tc.ok || ok && (!a.StartedAt.Equal(wantStart) || !a.EndedAt.Equal(tc.ended)) {
			t.Errorf("%s: Want = %+v, %v; want started %s, ended %s, %v", tc.name, a, ok, wantStart, tc.ended, tc.ok)
		}
	}
}
