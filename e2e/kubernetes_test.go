package e2e

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
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
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// k8sScenario is the simulated node the exporter samples beside its discovery.
const k8sScenario = `version: 1
name: k8s-node
start: "2026-01-05T00:00:00Z"
duration: 1s
interval: 100ms
loop: true
currency: USD
prices: {A100-SXM4-40GB: 1.60}
tiers: {pro: 1.0, budget: 0.7}
nodes:
  - name: node-a
    gpus:
      - {model: A100-SXM4-40GB, mig: ["3g.20gb", "3g.20gb"]}
tenants:
  - name: a
    tier: pro
    allocations:
      - {target: node-a/gpu0/mig0, requested: 0s, ready: 200ms, end: 800ms, workload: {sm: 0.5, mem: 0.5}}
`

const (
	k8sMIG0 = "MIG-aaaaaaaa-0000-4000-8000-000000000000"
	k8sMIG1 = "MIG-aaaaaaaa-0000-4000-8000-000000000001"
)

// TestKubernetesAllocations: the real exporter with --kubernetes and the simulated source, a
// real kube-apiserver, the kubelet's PodResources API served by a test server, the real
// collector and ClickHouse. Pods created and started through the API become allocations in
// ClickHouse, audited as door kubernetes (tenant = namespace, tier = label or the default);
// deleting a pod ends its allocation; a restarted exporter publishes nothing again.
func TestKubernetesAllocations(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	api := localtest.NewKubeAPIServer(t)
	kubeconfig, err := api.WriteKubeconfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client := k8sclient.NewForConfigOrDie(cfg)
	db := localtest.Database(t)
	brokers := strings.Join(localtest.FakeKafka(t), ",")
	kubelet := kubelettest.Start(t)
	apptest.StartCollector(t, ctx, "--kafka.brokers", brokers, "--clickhouse.dsn", db.DSN, "--collector.flush-interval", "200ms")
	scenario := writeFile(t, "k8s.yaml", k8sScenario)
	spool := t.TempDir()
	exporterArgs := []string{"--source", "sim", "--scenario", scenario, "--sim.start", "now", "--kafka.brokers", brokers, "--spool.dir", spool,
		"--kubernetes", "--kubernetes.kubeconfig", kubeconfig, "--kubernetes.node-name", "node-a",
		"--kubernetes.pod-resources-socket", kubelet.Socket, "--kubernetes.tier-label", "slicemeter.io/tier",
		"--kubernetes.default-tier", "pro", "--kubernetes.refresh-interval", "500ms", "--kubernetes.proc-root", filepath.Join(spool, "proc")}
	exp := apptest.StartExporter(t, ctx, exporterArgs...)

	for _, ns := range []string{"team-a", "team-b"} {
		if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	start := func(ns, name string, labels map[string]string) *corev1.Pod {
		p, err := client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec:       corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "main", Image: "registry.invalid/train:1"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// As the kubelet would: the container runs.
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "main", Image: "registry.invalid/train:1",
			ContainerID: "containerd://" + strings.Repeat("c", 64), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}}
		if p, err = client.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return p
	}
	kubelet.Set(nil, kubelettest.Devices("nvidia.com/mig-3g.20gb", k8sMIG0, k8sMIG1))
	startedAt := time.Now()
	train := start("team-a", "train", map[string]string{"slicemeter.io/tier": "budget"})
	infer := start("team-b", "infer", nil)
	kubelet.Set([]*podresourcesv1.PodResources{
		kubelettest.Pod("team-a", "train", map[string]map[string][]string{"main": {"nvidia.com/mig-3g.20gb": {k8sMIG0}}}),
		kubelettest.Pod("team-b", "infer", map[string]map[string][]string{"main": {"nvidia.com/mig-3g.20gb": {k8sMIG1}}}),
	}, kubelettest.Devices("nvidia.com/mig-3g.20gb", k8sMIG0, k8sMIG1))

	audited := func() int {
		return int(queryCount(t, ctx, db, "SELECT count() FROM "+tables.AllocationAudit+" WHERE door = 'kubernetes' AND principal = 'node/node-a'"))
	}
	// The audit entries are written before the rows: wait for both.
	waitUntil(t, ctx, "both allocations stored and audited as door kubernetes", func() bool {
		return audited() == 2 && queryCount(t, ctx, db, "SELECT count() FROM "+tables.Allocations+" FINAL") == 2
	})
	t.Logf("pod start to allocation stored: %s (refresh 500ms, collector flush 200ms)", time.Since(startedAt).Round(10*time.Millisecond))
	rows := queryRows(t, ctx, db, "SELECT allocation_id, tenant, tier, instance_id, ended_ns FROM "+tables.Allocations+" FINAL ORDER BY tenant")
	want := []string{
		"k8s/" + string(train.UID) + "/main/" + k8sMIG0 + " team-a budget " + k8sMIG0 + " 0",
		"k8s/" + string(infer.UID) + "/main/" + k8sMIG1 + " team-b pro " + k8sMIG1 + " 0",
	}
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Fatalf("allocations:\n%s\nwant:\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
	if text := metricsText(t, ctx, exp.URL("/metrics")); !strings.Contains(text, `slicemeter_instance_pod_info{container="main",kind="mig",namespace="team-b",node="node-a",pod="infer",slice="`+k8sMIG1+`"} 1`) {
		t.Errorf("/metrics has no pod info of infer:\n%s", grepLines(text, "pod_info"))
	}

	// Deleting a pod ends its allocation.
	zero := int64(0)
	if err := client.CoreV1().Pods("team-b").Delete(ctx, "infer", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	kubelet.Set([]*podresourcesv1.PodResources{
		kubelettest.Pod("team-a", "train", map[string]map[string][]string{"main": {"nvidia.com/mig-3g.20gb": {k8sMIG0}}}),
	}, kubelettest.Devices("nvidia.com/mig-3g.20gb", k8sMIG0, k8sMIG1))
	waitUntil(t, ctx, "infer's allocation ended", func() bool {
		return queryCount(t, ctx, db, "SELECT count() FROM "+tables.Allocations+" FINAL WHERE tenant = 'team-b' AND ended_ns > 0") == 1
	})

	// A restart re-lists everything and publishes nothing.
	if err := exp.Stop(); err != nil {
		t.Fatalf("exporter: %v\n%s", err, exp.LogTail(20))
	}
	exp = apptest.StartExporter(t, ctx, exporterArgs...) // ready: the pods are listed and the kubelet read
	time.Sleep(2 * time.Second)                          // a few refreshes (500ms): they would publish here
	text := metricsText(t, ctx, exp.URL("/metrics"))
	if v := metricValueText(text, "slicemeter_exporter_kubernetes_allocations_published_total"); v != 0 {
		t.Errorf("the restarted exporter published %v allocations, want 0", v)
	}
	if n := audited(); n != 3 {
		t.Errorf("%d audit entries of door kubernetes after the restart, want 3 (2 creates, 1 end)", n)
	}
	t.Logf("exporter after restart: RSS %d MiB; API requests: %s", rssBytes(t, exp.Pid())>>20, grepLines(text, "slicemeter_exporter_kubernetes_api_requests_total{"))
}

func waitUntil(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("no %s before the test's deadline", what)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func queryCount(t *testing.T, ctx context.Context, db *localtest.DB, q string) uint64 {
	t.Helper()
	var n uint64
	if err := db.Conn.QueryRow(ctx, q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func queryRows(t *testing.T, ctx context.Context, db *localtest.DB, q string) []string {
	t.Helper()
	rows, err := db.Conn.Query(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, tenant, tier, instance string
		var ended int64
		if err := rows.Scan(&id, &tenant, &tier, &instance, &ended); err != nil {
			t.Fatal(err)
		}
		out = append(out, strings.Join([]string{id, tenant, tier, instance, strconv.FormatInt(ended, 10)}, " "))
	}
	return out
}

func metricsText(t *testing.T, ctx context.Context, url string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func grepLines(text, s string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "; ")
}

func metricValueText(text, name string) float64 {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(text)
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	return v
}
