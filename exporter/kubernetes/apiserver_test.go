package kubernetes

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sclient "k8s.io/client-go/kubernetes"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// TestDiscoveryRealAPIServer runs the discovery against a real kube-apiserver: a pod created
// and started (its status patched as the kubelet would) through the API is published once,
// its deletion ends it, and the API server is asked one list and one watch, not polled.
func TestDiscoveryRealAPIServer(t *testing.T) {
	k := localtest.NewKubeAPIServer(t)
	kubeconfig, err := k.WriteKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kubelet := startKubelet(t)
	flags := &Flags{Enabled: true, Socket: kubelet.Socket, Kubeconfig: kubeconfig, NodeName: node, Labels: Labels{DefaultTier: "pro"},
		Refresh: 200 * time.Millisecond, StateDir: t.TempDir()}
	pods, err := flags.Client() // what the exporter runs on
	if err != nil {
		t.Fatal(err)
	}
	// The test plays the scheduler and the kubelet with a whole clientset.
	cfg, err := flags.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	client := k8sclient.NewForConfigOrDie(cfg)
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mk := func(name, nodeName string) *corev1.Pod {
		p, err := client.CoreV1().Pods("team-a").Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "main", Image: "registry.invalid/train:1"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "main", Image: "registry.invalid/train:1",
			ContainerID: "containerd://" + cidA, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(p.CreationTimestamp.Add(2 * time.Second))}}}}}
		if p, err = client.CoreV1().Pods("team-a").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return p
	}
	train := mk("train", node)
	mk("elsewhere", "node-2") // another node's pod: not watched
	kubelet.Set([]*podresourcesv1.PodResources{podRes("team-a", "train", map[string]map[string][]string{"main": {"nvidia.com/mig-1g.10gb": {migA}}})},
		&podresourcesv1.ContainerDevices{ResourceName: "nvidia.com/mig-1g.10gb", DeviceIds: []string{migA}})

	kub, err := DialPodResources(kubelet.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer kub.Close()
	out := &recorder{}
	d, err := New(Config{Flags: flags, Client: pods, Kubelet: kub, Writer: out, Registry: prometheus.NewRegistry(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	defer func() { cancel(); <-done }()

	var got []*pb.AllocationEvent
	waitFor(t, "the pod's allocation", func() bool { got = append(got, events(t, out.take(), pb.TopicAllocations)...); return len(got) > 0 })
	e := got[0]
	if len(got) != 1 || e.AllocationId != "k8s/"+string(train.UID)+"/main/"+migA || e.Tenant != "team-a" || e.InstanceId != migA ||
		e.RequestedAtNs != train.CreationTimestamp.UnixNano() || e.StartedAtNs != train.CreationTimestamp.Add(2*time.Second).UnixNano() || e.EndedAtNs != 0 {
		t.Fatalf("published %v; want train's allocation", got)
	}
	zero := int64(0)
	if err := client.CoreV1().Pods("team-a").Delete(ctx, "train", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	kubelet.Set(nil)
	got = nil
	waitFor(t, "the end of the allocation", func() bool { got = append(got, events(t, out.take(), pb.TopicAllocations)...); return len(got) > 0 })
	if len(got) != 1 || got[0].EndedAtNs == 0 || got[0].Version != 2 {
		t.Fatalf("after the deletion published %v; want the end, version 2", got)
	}
	if r := d.pods.Requests(); r["list"] != 1 || r["watch"] != 1 {
		t.Errorf("API requests %v; want one list and one watch", r)
	}
	if m := d.Missing(); len(m) != 0 {
		t.Errorf("Missing = %q", m)
	}
}
