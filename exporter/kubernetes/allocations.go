package kubernetes

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/slicemeter/slicemeter/schemas/allocation"
)

// Labels says where a pod's tenant and tier come from.
type Labels struct {
	Tenant      string // pod label holding the tenant; empty: the namespace
	Tier        string // pod label holding the tier; empty or absent: DefaultTier
	DefaultTier string
}

// Holding is a device a container holds, remembered from the first PodResources answer that
// listed it until its allocation has ended and its pod is gone (the kubelet stops listing a
// pod's devices once it has terminated).
type Holding struct {
	PodUID    string `json:"pod_uid"`
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	Container string `json:"container"`
	Device    string `json:"device"`   // device id
	Instance  string `json:"instance"` // instance id
	Kind      string `json:"kind"`     // gpu, mig, share
	GPU       string `json:"gpu"`      // the GPU's UUID where the device id names it
}

// AllocationID is the allocation of a container's device: stable per pod UID, container and
// device id, so that every exporter start derives the same one.
func (h Holding) AllocationID() string { return "k8s/" + h.PodUID + "/" + h.Container + "/" + h.Device }

// Sent is what was last published for an allocation.
type Sent struct {
	Holding
	Allocation allocation.Allocation `json:"allocation"`
	Version    uint64                `json:"version"`
}

// Gone is a pod the informer saw deleted: its last state and when.
type Gone struct {
	Pod *corev1.Pod
	At  time.Time
}

// Want is the allocation a holding should have now; ok false while its container has not
// started (nothing to bill yet).
func Want(h Holding, pod *corev1.Pod, gone *Gone, node string, l Labels, now time.Time) (allocation.Allocation, bool) {
	p := pod
	if p == nil && gone != nil {
		p = gone.Pod
	}
	a := allocation.Allocation{ID: h.AllocationID(), Node: node, Instance: h.Instance, Tenant: h.Namespace, Tier: l.DefaultTier}
	if p == nil {
		return a, false // only a remembered holding: the caller ends what it sent
	}
	a.Tenant = p.Namespace
	if l.Tenant != "" {
		a.Tenant = p.Labels[l.Tenant] // absent: empty, refused by the validator with the reason
	}
	if v := p.Labels[l.Tier]; l.Tier != "" && v != "" {
		a.Tier = v
	}
	a.RequestedAt = p.CreationTimestamp.UTC()
	started, finished, done := containerTimes(p, h.Container)
	if started.IsZero() {
		return a, false
	}
	a.StartedAt = started
	switch {
	case done: // an init container that completed, whatever its pod does next
		a.EndedAt = finished
	case pod == nil: // deleted while we watched
		a.EndedAt = gone.At
		if !finished.IsZero() {
			a.EndedAt = finished
		}
	case p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed:
		a.EndedAt = now
		if !finished.IsZero() {
			a.EndedAt = finished
		}
	}
	if !a.EndedAt.IsZero() && !a.EndedAt.After(a.StartedAt) {
		// Kubernetes stamps seconds: a container that ran less than one holds it for one.
		a.EndedAt = a.StartedAt.Add(time.Second)
	}
	return a, true
}

// containerTimes is when the container first started (the earliest start its status still
// shows: a restarted container keeps its devices) and when it finished, if it has; done: it
// finished for good while its pod may run on (an init container that completed). Init
// containers count: a restartable one (a sidecar) is listed by the kubelet with its devices.
func containerTimes(p *corev1.Pod, name string) (started, finished time.Time, done bool) {
	first := func(t time.Time) {
		if !t.IsZero() && (started.IsZero() || t.Before(started)) {
			started = t.UTC()
		}
	}
	for _, statuses := range [][]corev1.ContainerStatus{p.Status.ContainerStatuses, p.Status.InitContainerStatuses} {
		for _, s := range statuses {
			if s.Name != name {
				continue
			}
			if r := s.State.Running; r != nil {
				first(r.StartedAt.Time)
			}
			if t := s.State.Terminated; t != nil {
				first(t.StartedAt.Time)
				finished = t.FinishedAt.UTC()
			}
			if t := s.LastTerminationState.Terminated; t != nil {
				first(t.StartedAt.Time)
			}
		}
	}
	return started, finished, completedInit(p, name)
}

// completedInit says whether name is a classic init container of p that has completed: it
// never runs again (a failed one is run again, a sidecar is restarted).
func completedInit(p *corev1.Pod, name string) bool {
	for _, c := range p.Spec.InitContainers {
		if c.Name == name && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			return false
		}
	}
	for _, s := range p.Status.InitContainerStatuses {
		if s.Name == name {
			t := s.State.Terminated
			return t != nil && t.ExitCode == 0 && !t.FinishedAt.IsZero()
		}
	}
	return false
}

// Event is an allocation to publish at a version.
type Event struct {
	Holding
	Allocation allocation.Allocation
	Version    uint64
}

// nextVersion is the version an allocation is published at: 1 while it runs and 2 once it has
// ended, so that a restart without a state file re-publishes the same versions (a replay the
// collector stores nothing for); past any version sent before.
func nextVersion(a allocation.Allocation, sent *Sent) uint64 {
	v := uint64(1)
	if !a.EndedAt.IsZero() {
		v = 2
	}
	if sent != nil && sent.Version >= v {
		v = sent.Version + 1
	}
	return v
}

// Changes returns the events that bring what was sent up to what is wanted, in allocation id
// order. A remembered holding whose pod is neither listed nor seen deleted (deleted while the
// exporter was down) is ended at lastSeen, the last time the exporter knew its pod.
func Changes(holdings map[string]Holding, sent map[string]*Sent, pods map[string]*corev1.Pod, gone map[string]*Gone,
	lastSeen time.Time, node string, l Labels, now time.Time) []Event {
	var out []Event
	for id, h := range holdings {
		s := sent[id]
		a, ok := Want(h, pods[h.PodUID], gone[h.PodUID], node, l, now)
		if !ok {
			if s == nil || !s.Allocation.EndedAt.IsZero() || pods[h.PodUID] != nil || gone[h.PodUID] != nil {
				continue
			}
			// Gone while the exporter was down: end it where it was last known to run.
			a = s.Allocation
			a.EndedAt = lastSeen
			if !a.EndedAt.After(a.StartedAt) {
				a.EndedAt = a.StartedAt.Add(time.Second)
			}
		}
		if s != nil {
			if !s.Allocation.StartedAt.IsZero() && s.Allocation.StartedAt.Before(a.StartedAt) {
				a.StartedAt = s.Allocation.StartedAt // a restart's status no longer shows the first start
			}
			if a.Same(s.Allocation) {
				continue
			}
			if !s.Allocation.EndedAt.IsZero() {
				continue // an ended allocation is final: it does not run again, nor end again later
			}
		}
		out = append(out, Event{Holding: h, Allocation: a, Version: nextVersion(a, s)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Allocation.ID < out[j].Allocation.ID })
	return out
}
