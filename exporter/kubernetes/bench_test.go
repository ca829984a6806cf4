package kubernetes

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// BenchmarkRefreshFullNode is one refresh of a node at the kubelet's pod maximum (110 pods)
// with 56 MIG devices (8 GPUs × 7 instances) held by 56 of them, nothing changing: the kubelet
// read over its socket, the comparison with the informer's cache and the view. At the default
// --kubernetes.refresh-interval of 10 s, CPU is ns/op / 10 s. heap-B is what the discovery and
// its informer hold; scrape-ns the pod info series of one scrape.
//
//	go test -run '^$' -bench RefreshFullNode -benchmem ./exporter/kubernetes/
func BenchmarkRefreshFullNode(b *testing.B) {
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	var pods []*corev1.Pod
	var res []*podresourcesv1.PodResources
	var mig []string
	for i := range 110 {
		uid := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		name := fmt.Sprintf("pod-%03d", i)
		ns := fmt.Sprintf("team-%02d", i%20)
		pods = append(pods, runningPod(ns, name, uid, map[string]string{"app": name}, "main", fmt.Sprintf("%064x", i), t0))
		if i < 56 {
			id := fmt.Sprintf("MIG-%08d-0000-4000-8000-000000000000", i)
			mig = append(mig, id)
			res = append(res, podRes(ns, name, map[string]map[string][]string{"main": {"nvidia.com/mig-1g.10gb": {id}}}))
		} else {
			res = append(res, podRes(ns, name, map[string]map[string][]string{"main": {}}))
		}
	}
	f := newFixture(nil, pods...)
	f.kubelet = startKubelet(b)
	f.kubelet.Set(res, &podresourcesv1.ContainerDevices{ResourceName: "nvidia.com/mig-1g.10gb", DeviceIds: mig})
	f.flags.Socket = f.kubelet.Socket
	f.flags.StateDir = b.TempDir()
	reg := prometheus.NewRegistry()
	d := startBench(b, f, reg)
	ctx := context.Background()
	d.Refresh(ctx, t0.Add(time.Hour))
	if n := len(f.out.take()); n != 56 {
		b.Fatalf("published %d allocations, want 56", n)
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)

	b.ResetTimer()
	for i := range b.N {
		d.Refresh(ctx, t0.Add(time.Hour+time.Duration(i)*time.Second))
	}
	b.StopTimer()
	if m := f.out.take(); len(m) != 0 {
		b.Fatalf("steady refreshes published %d messages", len(m))
	}
	b.ReportMetric(float64(after.HeapInuse)-float64(before.HeapInuse), "heap-B")
	start := time.Now()
	const scrapes = 100
	for range scrapes {
		if n, err := testutil.GatherAndCount(reg, "slicemeter_instance_pod_info"); err != nil || n != 56 {
			b.Fatalf("pod info series: %d, %v", n, err)
		}
	}
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/scrapes, "scrape-ns")
}

func startBench(b *testing.B, f *fixture, reg prometheus.Registerer) *Discovery {
	kub, err := DialPodResources(f.flags.Socket)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = kub.Close() })
	d, err := New(Config{Flags: f.flags, Client: f.client.CoreV1().Pods(metav1.NamespaceAll), Kubelet: kub, Writer: f.out, Registry: reg, Logger: discardLogger()})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	go d.pods.Run(ctx)
	for deadline := time.Now().Add(time.Minute); !d.pods.Synced(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("informer not synced")
		}
	}
	return d
}
