package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sclient "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/e2e/apptest"
	"github.com/slicemeter/slicemeter/exporter/kubernetes/kubelettest"
	"github.com/slicemeter/slicemeter/exporter/sim"
)

// fullNodeScenario is a node of 8 A100s split into 7 MIG instances each: 56 instances, sampled
// every 100 ms.
func fullNodeScenario() string {
	var b strings.Builder
	b.WriteString("version: 1\nname: k8s-full-node\nstart: \"2026-01-05T00:00:00Z\"\nduration: 1s\ninterval: 100ms\nloop: true\nids: uuid\n" +
		"currency: USD\nprices: {A100-SXM4-40GB: 1.60}\ntiers: {pro: 1.0}\nnodes:\n  - name: node-a\n    gpus:\n")
	for range 8 {
		b.WriteString(`      - {model: A100-SXM4-40GB, mig: ["1g.5gb", "1g.5gb", "1g.5gb", "1g.5gb", "1g.5gb", "1g.5gb", "1g.5gb"]}` + "\n")
	}
	b.WriteString("tenants:\n  - name: workloads\n    tier: pro\n    allocations:\n")
	for g := range 8 {
		for m := range 7 {
			fmt.Fprintf(&b, "      - {target: node-a/gpu%d/mig%d, requested: 0s, ready: 0s, end: 1s, workload: {sm: 0.5, mem: 0.5}}\n", g, m)
		}
	}
	return b.String()
}

// TestKubernetesFullNodeFigures measures, without asserting any speed, the exporter on a node at
// the kubelet's pod maximum: 110 pods in 10 namespaces through a real kube-apiserver, 56 of
// them holding one MIG instance each, the 56 instances sampled every 100 ms. It logs the
// exporter's CPU (from /proc: the sampling, the discovery's refreshes every 10 s, a scrape every
// 5 s) and RSS with --kubernetes and, for comparison, without; and the CPU of one scrape.
//
//	go test -count=1 -run TestKubernetesFullNodeFigures -v ./e2e/
func TestKubernetesFullNodeFigures(t *testing.T) {
	// In turn, not in parallel: the CPU figures it logs are measured with nothing else of
	// this package running.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	scenario := writeFile(t, "full-node.yaml", fullNodeScenario())
	uuids, err := sim.UUIDs(loadScenario(t, scenario))
	if err != nil {
		t.Fatal(err)
	}
	api := localtest.NewKubeAPIServer(t)
	kubeconfig, err := api.WriteKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 200, 400 // the test's own 330 writes, quickly
	client := k8sclient.NewForConfigOrDie(cfg)
	brokers := strings.Join(localtest.FakeKafka(t), ",")
	kubelet := kubelettest.Start(t)

	var res []*podresourcesv1.PodResources
	var migs []string
	for i := range 10 {
		if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("team-%02d", i)}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 110 {
		ns, name := fmt.Sprintf("team-%02d", i%10), fmt.Sprintf("pod-%03d", i)
		p, err := client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
			Spec:       corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "main", Image: "registry.invalid/train:1"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "main", Image: "registry.invalid/train:1",
			ContainerID: fmt.Sprintf("containerd://%064x", i), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}}
		if _, err := client.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		devices := map[string]map[string][]string{"main": {}}
		if i < 56 {
			id := uuids[fmt.Sprintf("node-a/gpu%d/mig%d", i/7, i%7)]
			migs = append(migs, id)
			devices["main"]["nvidia.com/mig-1g.5gb"] = []string{id}
		}
		res = append(res, kubelettest.Pod(ns, name, devices))
	}
	kubelet.Set(res, kubelettest.Devices("nvidia.com/mig-1g.5gb", migs...))

	base := []string{"--source", "sim", "--scenario", scenario, "--sim.start", "now", "--kafka.brokers", brokers}
	measure := func(name string, args ...string) {
		spool := t.TempDir()
		exp := apptest.StartExporter(t, ctx, append(append(append([]string(nil), base...), "--spool.dir", spool), args...)...)
		if len(args) > 0 {
			waitUntil(t, ctx, "the 56 allocations published", func() bool {
				return metricValueText(metricsText(t, ctx, exp.URL("/metrics")), "slicemeter_exporter_kubernetes_allocations_published_total") == 56
			})
			if n := strings.Count(metricsText(t, ctx, exp.URL("/metrics")), "slicemeter_instance_pod_info{"); n != 56 {
				t.Errorf("%d pod info series, want 56", n)
			}
		}
		// Steady state: 20 s of sampling, a scrape every 5 s.
		cpu0, wall0 := cpuSeconds(t, exp.Pid()), time.Now()
		var size int
		for range 4 {
			time.Sleep(5 * time.Second)
			size = len(metricsText(t, ctx, exp.URL("/metrics")))
		}
		cpu := cpuSeconds(t, exp.Pid()) - cpu0
		wall := time.Since(wall0).Seconds()
		// Scrapes alone: 50 back to back.
		scrape0 := cpuSeconds(t, exp.Pid())
		start := time.Now()
		for range 50 {
			metricsText(t, ctx, exp.URL("/metrics"))
		}
		perScrape := (cpuSeconds(t, exp.Pid()) - scrape0 - cpu/wall*time.Since(start).Seconds()) / 50
		t.Logf("%s: CPU %.2f %% of a core over %.0f s (56 instances at 100 ms: %.0f µs a tick), RSS %d MiB, a scrape %.1f ms CPU (%d kB)",
			name, 100*cpu/wall, wall, 1e6*cpu/(wall*10), rssBytes(t, exp.Pid())>>20, 1e3*perScrape, size>>10)
		if err := exp.Stop(); err != nil {
			t.Fatalf("exporter: %v\n%s", err, exp.LogTail(20))
		}
	}
	measure("with --kubernetes (110 pods, 56 MIG held)", "--kubernetes", "--kubernetes.kubeconfig", kubeconfig, "--kubernetes.node-name", "node-a",
		"--kubernetes.pod-resources-socket", kubelet.Socket, "--kubernetes.default-tier", "pro", "--kubernetes.proc-root", filepath.Join(t.TempDir(), "proc"))
	measure("without --kubernetes")
}

// cpuSeconds is the user and system CPU time process pid has used (/proc/PID/stat, in clock
// ticks of 1/100 s, the USER_HZ of Linux on every architecture Go runs this on).
func cpuSeconds(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Skip("no /proc")
	}
	// The fields after the command (which may hold spaces) start at state, field 3.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	return (utime + stime) / 100
}
