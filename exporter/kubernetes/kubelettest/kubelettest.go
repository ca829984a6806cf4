// Package kubelettest serves the kubelet's real PodResources v1 API (k8s.io/kubelet's
// generated server) on a unix socket in a test's temporary directory, answering what the test
// sets: the kubelet itself for the exporter's --kubernetes discovery, without a node.
package kubelettest

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"google.golang.org/grpc"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// Server is a PodResources v1 server.
type Server struct {
	podresourcesv1.UnimplementedPodResourcesListerServer
	Socket string

	mu          sync.Mutex
	pods        []*podresourcesv1.PodResources
	allocatable []*podresourcesv1.ContainerDevices
}

// Start serves on a new socket until t ends. The socket's directory is short-named under
// the system's temp dir: a unix socket path is limited to 108 bytes.
func Start(t testing.TB) *Server {
	t.Helper()
	dir, err := os.MkdirTemp("", "kubelet")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	k := &Server{Socket: filepath.Join(dir, "kubelet.sock")}
	l, err := net.Listen("unix", k.Socket)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	podresourcesv1.RegisterPodResourcesListerServer(s, k)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	return k
}

// Set is what List and GetAllocatableResources answer from now on.
func (k *Server) Set(pods []*podresourcesv1.PodResources, allocatable ...*podresourcesv1.ContainerDevices) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.pods, k.allocatable = pods, allocatable
}

// List answers the pods set.
func (k *Server) List(context.Context, *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return &podresourcesv1.ListPodResourcesResponse{PodResources: k.pods}, nil
}

// GetAllocatableResources answers the devices set.
func (k *Server) GetAllocatableResources(context.Context, *podresourcesv1.AllocatableResourcesRequest) (*podresourcesv1.AllocatableResourcesResponse, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return &podresourcesv1.AllocatableResourcesResponse{Devices: k.allocatable}, nil
}

// Pod is one pod's resources: container → resource name → device ids.
func Pod(ns, name string, containers map[string]map[string][]string) *podresourcesv1.PodResources {
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

// Devices is an allocatable resource with its device ids.
func Devices(resource string, ids ...string) *podresourcesv1.ContainerDevices {
	return &podresourcesv1.ContainerDevices{ResourceName: resource, DeviceIds: ids}
}
