package kubernetes

import (
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
