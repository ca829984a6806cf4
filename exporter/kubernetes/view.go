package kubernetes

import (
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/slicemeter/slicemeter/exporter"
)

// view is what one refresh found, read by every tick and scrape without asking anything.
type view struct {
	running []Holding                 // holdings of running containers, by instance
	shares  map[string]exporter.Share // by GPU UUID
	// byContainer: container id (without the runtime's scheme) → the share holdings of that
	// container, for mapping a process to its replica.
	byContainer map[string][]Holding
	gen         uint64 // refresh count: the pid cache is dropped when it changes
}

// buildView is the view of the holdings, the pods and (if read) the kubelet's snapshot.
func (d *Discovery) buildView(snap Snapshot, kubeletOK bool, pods map[string]*corev1.Pod) *view {
	prev := d.view.Load()
	v := &view{shares: map[string]exporter.Share{}, byContainer: map[string][]Holding{}, gen: prev.gen + 1}
	if !kubeletOK { // the last known replicas stay
		v.shares = prev.shares
	}
	ids := map[string][]string{} // GPU UUID → its replicas' device ids
	if kubeletOK {
		for _, id := range snap.Allocatable {
			if dev, err := ParseDevice(id); err == nil && dev.GPU != "" && dev.Kind.String() == "KIND_SHARE" {
				ids[dev.GPU] = append(ids[dev.GPU], id)
			}
		}
	}
	for _, h := range d.holdings {
		p := pods[h.PodUID]
		if p == nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed || completedInit(p, h.Container) {
			continue
		}
		v.running = append(v.running, h)
		if h.Kind != "share" {
			continue
		}
		if kubeletOK && !contains(ids[h.GPU], h.Device) {
			ids[h.GPU] = append(ids[h.GPU], h.Device)
		}
		for _, statuses := range [][]corev1.ContainerStatus{p.Status.ContainerStatuses, p.Status.InitContainerStatuses} { // sidecars too
			for _, s := range statuses {
				if s.Name == h.Container && s.ContainerID != "" {
					cid := TrimContainerID(s.ContainerID)
					v.byContainer[cid] = append(v.byContainer[cid], h)
				}
			}
		}
	}
	sort.Slice(v.running, func(i, j int) bool {
		a, b := v.running[i], v.running[j]
		return a.Instance < b.Instance || a.Instance == b.Instance && a.AllocationID() < b.AllocationID()
	})
	for gpu, list := range ids {
		sort.Strings(list)
		gpu := gpu
		v.shares[gpu] = exporter.Share{Replicas: len(list), IDs: list, Replica: func(pid uint32) (string, bool) { return d.replica(v, gpu, pid) }}
	}
	return v
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Shares is the exporter.Shares of the node's time-sliced and MPS GPUs, as the last refresh
// found them.
func (d *Discovery) Shares() exporter.Shares { return sharesOf{d} }

type sharesOf struct{ d *Discovery }

func (s sharesOf) Share(uuid string) exporter.Share { return s.d.view.Load().shares[uuid] }

// replica maps a process on GPU gpu to the replica its container holds there.
func (d *Discovery) replica(v *view, gpu string, pid uint32) (string, bool) {
	cg, ok := d.pids.get(v.gen, pid)
	if !ok {
		return "", false
	}
	for _, h := range v.byContainer[cg.ContainerID] {
		if h.GPU == gpu {
			return h.Instance, true
		}
	}
	return "", false
}

// pidCache keeps each process's cgroup for one refresh: a process does not change pods, and
// its pid is reused rarely; it is read again after the next refresh anyway.
type pidCache struct {
	root string
	mu   sync.Mutex
	gen  uint64
	m    map[uint32]cgroupEntry
}

type cgroupEntry struct {
	cg Cgroup
	ok bool
}

func (c *pidCache) get(gen uint64, pid uint32) (Cgroup, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen || c.m == nil {
		c.gen, c.m = gen, map[uint32]cgroupEntry{}
	}
	if e, ok := c.m[pid]; ok {
		return e.cg, e.ok
	}
	cg, ok, err := ReadCgroup(c.root, pid)
	if err != nil {
		ok = false // gone already, or not ours to read: not a tenant's
	}
	c.m[pid] = cgroupEntry{cg, ok}
	return cg, ok
}

// podLabels are the pod info series' labels, beside node and slice.
var podLabels = []string{"namespace", "pod", "container"}

func holdingLabels(node string, h Holding) []string {
	return []string{node, h.Instance, strings.ToLower(h.Kind), h.Namespace, h.Pod, h.Container}
}
