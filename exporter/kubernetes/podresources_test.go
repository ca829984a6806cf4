package kubernetes

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/slicemeter/slicemeter/exporter/kubernetes/kubelettest"
)

func startKubelet(t testing.TB) *kubelettest.Server { return kubelettest.Start(t) }

var podRes = kubelettest.Pod

func TestPodResourcesRead(t *testing.T) {
	k := startKubelet(t)
	k.Set([]*podresourcesv1.PodResources{
		podRes("team-a", "train", map[string]map[string][]string{
			"main":    {"nvidia.com/gpu": {gpuA}, "example.com/nic": {"nic0"}},
			"sidecar": {},
		}),
		podRes("team-b", "infer", map[string]map[string][]string{"srv": {"nvidia.com/mig-1g.10gb": {migA}}}),
	}, &podresourcesv1.ContainerDevices{ResourceName: "nvidia.com/gpu", DeviceIds: []string{gpuA, gpuB}},
		&podresourcesv1.ContainerDevices{ResourceName: "example.com/nic", DeviceIds: []string{"nic0"}})
	c, err := DialPodResources(k.Socket)
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
