package kubernetes

import (
	"context"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// kubeletServer serves the real PodResources v1 API on a unix socket, as the kubelet does,
// answering what the test sets.
type kubeletServer struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	socket string

	mu          sync.Mutex
	pods        []*podresourcesv1.PodResources
	allocatable []*podresourcesv1.ContainerDevices
	lists       int
}

func startKubelet(t testing.TB) *kubeletServer {
	t.Helper()
	k := &kubeletServer{socket: filepath.Join(t.TempDir(), "kubelet.sock")}
	l, err := net.Listen("unix", k.socket)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	podresourcesv1.RegisterPodResourcesListerServer(s, k)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	return k
}

func (k *kubeletServer) set(pods []*podresourcesv1.PodResources, allocatable ...*podresourcesv1.ContainerDevices) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.pods, k.allocatable = pods, allocatable
}

func (k *kubeletServer) List(context.Context, *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.lists++
	return &podresourcesv1.ListPodResourcesResponse{PodResources: k.pods}, nil
}

func (k *kubeletServer) GetAllocatableResources(context.Context, *podresourcesv1.AllocatableResourcesRequest) (*podresourcesv1.AllocatableResourcesResponse, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return &podresourcesv1.AllocatableResourcesResponse{Devices: k.allocatable}, nil
}

// podRes is one pod's resources: container → resource → device ids.
func podRes(ns, name string, containers map[string]map[string][]string) *podresourcesv1.PodResources {
	p := &podresourcesv1.PodResources{Namespace: ns, Name: name}
	for c, res := range containers {
		cr := &podresourcesv1.ContainerResources{Name: c}
		for r, ids := range res {
			cr.Devices = append(cr.Devices, &podresourcesv1.ContainerDevices{ResourceName: r, DeviceIds: ids})
		}
		p.Containers = append(p.Containers, cr)
	}
	return p
}

func TestPodResourcesRead(t *testing.T) {
	k := startKubelet(t)
	k.set([]*podresourcesv1.PodResources{
		podRes("team-a", "train", map[string]map[string][]string{
			"main":    {"nvidia.com/gpu": {gpuA}, "example.com/nic": {"nic0"}},
			"sidecar": {},
		}),
		podRes("team-b", "infer", map[string]map[string][]string{"srv": {"nvidia.com/mig-1g.10gb": {migA}}}),
	}, &podresourcesv1.ContainerDevices{ResourceName: "nvidia.com/gpu", DeviceIds: []string{gpuA, gpuB}},
		&podresourcesv1.ContainerDevices{ResourceName: "example.com/nic", DeviceIds: []string{"nic0"}})
	c, err := DialPodResources(k.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s, err := c.Read(context.Background(), now)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Assigned) != 2 || len(s.Allocatable) != 2 || !s.At.Equal(now) {
		t.Fatalf("snapshot = %+v; want the 2 NVIDIA assignments and 2 allocatable GPUs, not the NIC", s)
	}
	got := map[string]Assignment{}
	for _, a := range s.Assigned {
		got[a.DeviceID] = a
	}
	if a := got[gpuA]; a.Namespace != "team-a" || a.Pod != "train" || a.Container != "main" || a.Resource != "nvidia.com/gpu" {
		t.Errorf("assignment of %s = %+v", gpuA, a)
	}
	if a := got[migA]; a.Namespace != "team-b" || a.Container != "srv" {
		t.Errorf("assignment of %s = %+v", migA, a)
	}
}

func TestPodResourcesMissingSocket(t *testing.T) {
	c, err := DialPodResources(filepath.Join(t.TempDir(), "absent.sock"))
	if err != nil {
		t.Fatal(err) // connecting is lazy: a missing socket is an error of each call, retried
	}
	defer c.Close()
	if _, err := c.Read(context.Background(), time.Now()); err == nil {
		t.Fatal("Read over a missing socket: no error")
	}
}
