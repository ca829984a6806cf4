package e2e

import (
	"context"
	"fmt"
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

	"github.com/slicemeter/slicemeter/attribution"
	"github.com/slicemeter/slicemeter/deploy/local"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/e2e/apptest"
	"github.com/slicemeter/slicemeter/exporter/kubernetes/kubelettest"
	"github.com/slicemeter/slicemeter/exporter/sim"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
	"github.com/slicemeter/slicemeter/schemas/hardware"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// k8sScenario is the simulated node the exporter samples beside its discovery: two MIG
// instances named by their UUIDs, as the kubelet's device ids name them (ids: uuid), busy at
// 50 % and 25 % all the time. Its tenant only drives the workloads: the allocations come from
// the pods.
const k8sScenario = `version: 1
name: k8s-node
start: "2026-01-05T00:00:00Z"
duration: 1s
interval: 100ms
loop: true
ids: uuid
currency: USD
prices: {A100-SXM4-40GB: 1.60}
tiers: {pro: 1.0, budget: 0.7}
nodes:
  - name: node-a
    gpus:
      - {model: A100-SXM4-40GB, mig: ["3g.20gb", "3g.20gb"]}
tenants:
  - name: workloads
    tier: pro
    allocations:
      - {target: node-a/gpu0/mig0, requested: 0s, ready: 0s, end: 1s, workload: {sm: 0.5, mem: 0.5}}
      - {target: node-a/gpu0/mig1, requested: 0s, ready: 0s, end: 1s, workload: {sm: 0.25, mem: 0.5}}
`

// The pods' times, from the second both containers start (S): infer runs k8sInferFor, train
// all of the report's window, [S, S + k8sWindow).
const (
	k8sInferFor = 4 * time.Second
	k8sWindow   = 10 * time.Second
)

// TestKubernetesAllocations: the real exporter with --kubernetes and the simulated source, a
// real kube-apiserver, the kubelet's PodResources API served by a test server (handing out the
// simulated MIG instances' UUIDs), the real collector and ClickHouse. Pods created and started
// through the API become allocations in ClickHouse, audited as door kubernetes (tenant =
// namespace, tier = label or the default); a pod that finishes and is deleted ends its
// allocation at the finish the API shows; the report per namespace over the window bills what
// the pods' times say, as the definitions price it; a restarted exporter publishes nothing
// again; the exporter only lists and watches pods.
func TestKubernetesAllocations(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	scenario := writeFile(t, "k8s.yaml", k8sScenario)
	sc := loadScenario(t, scenario)
	uuids, err := sim.UUIDs(sc)
	if err != nil {
		t.Fatal(err)
	}
	mig0, mig1 := uuids["node-a/gpu0/mig0"], uuids["node-a/gpu0/mig1"]
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
	db := localtest.Database(t, localtest.DatabaseOptions{})
	// A broker of its own (the test recreates the fixed-name topics, which on the shared
	// broker would keep it from running beside the others), and a consumer group of its own.
	kfk := localtest.NewKafka(t)
	brokers := kfk.Brokers()
	freshTopics(t, ctx, kafkaconn.ParseBrokers(brokers), 4, pb.TopicSamples, pb.TopicAllocations, pb.TopicDeadLetter)
	kubelet := kubelettest.Start(t)
	apptest.StartCollector(t, ctx, "--kafka.brokers", brokers, "--clickhouse.dsn", db.DSN, "--collector.flush-interval", "200ms",
		"--kafka.group", "e2e-kubernetes")
	spool := t.TempDir()
	exporterArgs := []string{"--source", "sim", "--scenario", scenario, "--sim.start", "now", "--kafka.brokers", brokers, "--spool.dir", spool,
		"--kafka.flush-interval", "200ms",
		"--kubernetes", "--kubernetes.kubeconfig", kubeconfig, "--kubernetes.node-name", "node-a",
		"--kubernetes.pod-resources-socket", kubelet.Socket, "--kubernetes.tier-label", "slicemeter.io/tier",
		"--kubernetes.default-tier", "pro", "--kubernetes.refresh-interval", "500ms", "--kubernetes.proc-root", filepath.Join(spool, "proc")}
	requestsBefore := podRequests(t, ctx, api)
	measuredFrom := time.Now()
	exp := apptest.StartExporter(t, ctx, exporterArgs...)

	for _, ns := range []string{"team-a", "team-b"} {
		if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create := func(ns, name string, labels map[string]string) *corev1.Pod {
		p, err := client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec:       corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "main", Image: "registry.invalid/train:1"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	// As the kubelet would: the container runs since S, or ran from S to its finish.
	setStatus := func(p *corev1.Pod, phase corev1.PodPhase, state corev1.ContainerState) *corev1.Pod {
		p.Status = corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{Name: "main", Image: "registry.invalid/train:1",
			ContainerID: "containerd://" + strings.Repeat("c", 64), State: state}}}
		p, err := client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	kubelet.Set(nil, kubelettest.Devices("nvidia.com/mig-3g.20gb", mig0, mig1))
	train := create("team-a", "train", map[string]string{"slicemeter.io/tier": "budget"})
	infer := create("team-b", "infer", nil)
	// Both start at the second after the later creation (the API keeps whole seconds).
	s := train.CreationTimestamp.Time
	if infer.CreationTimestamp.After(s) {
		s = infer.CreationTimestamp.Time
	}
	s = s.Add(time.Second).UTC()
	sleepUntil(t, ctx, s)
	startedAt := time.Now()
	train = setStatus(train, corev1.PodRunning, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(s)}})
	infer = setStatus(infer, corev1.PodRunning, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(s)}})
	kubelet.Set([]*podresourcesv1.PodResources{
		kubelettest.Pod("team-a", "train", map[string]map[string][]string{"main": {"nvidia.com/mig-3g.20gb": {mig0}}}),
		kubelettest.Pod("team-b", "infer", map[string]map[string][]string{"main": {"nvidia.com/mig-3g.20gb": {mig1}}}),
	}, kubelettest.Devices("nvidia.com/mig-3g.20gb", mig0, mig1))

	audited := func() int {
		return int(queryCount(t, ctx, db, "SELECT count() FROM "+tables.AllocationAudit+" WHERE door = 'kubernetes' AND principal = 'node/node-a'"))
	}
	// The audit entries are written before the rows: wait for both.
	waitUntil(t, ctx, "both allocations stored and audited as door kubernetes", func() bool {
		return audited() == 2 && queryCount(t, ctx, db, "SELECT count() FROM "+tables.Allocations+" FINAL") == 2
	})
	t.Logf("pod started (status) to allocation stored: %s (refresh 500ms, collector flush 200ms)", time.Since(startedAt).Round(10*time.Millisecond))
	rows := queryRows(t, ctx, db, "SELECT allocation_id, tenant, tier, instance_id, ended_ns FROM "+tables.Allocations+" FINAL ORDER BY tenant")
	want := []string{
		"k8s/" + string(train.UID) + "/main/" + mig0 + " team-a budget " + mig0 + " 0",
		"k8s/" + string(infer.UID) + "/main/" + mig1 + " team-b pro " + mig1 + " 0",
	}
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Fatalf("allocations:\n%s\nwant:\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
	if text := metricsText(t, ctx, exp.URL("/metrics")); !strings.Contains(text, `slicemeter_instance_pod_info{container="main",kind="mig",namespace="team-b",node="node-a",pod="infer",slice="`+mig1+`"} 1`) {
		t.Errorf("/metrics has no pod info of infer:\n%s", grepLines(text, "pod_info"))
	}

	// infer finishes, as the kubelet reports it, and is deleted: its allocation ends at the finish.
	finish := s.Add(k8sInferFor)
	sleepUntil(t, ctx, finish)
	setStatus(infer, corev1.PodSucceeded, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		StartedAt: metav1.NewTime(s), FinishedAt: metav1.NewTime(finish), Reason: "Completed"}})
	zero := int64(0)
	if err := client.CoreV1().Pods("team-b").Delete(ctx, "infer", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	kubelet.Set([]*podresourcesv1.PodResources{
		kubelettest.Pod("team-a", "train", map[string]map[string][]string{"main": {"nvidia.com/mig-3g.20gb": {mig0}}}),
	}, kubelettest.Devices("nvidia.com/mig-3g.20gb", mig0, mig1))
	waitUntil(t, ctx, "infer's allocation ended", func() bool {
		return queryCount(t, ctx, db, "SELECT count() FROM "+tables.Allocations+" FINAL WHERE tenant = 'team-b' AND ended_ns > 0") == 1
	})
	if n := queryCount(t, ctx, db, fmt.Sprintf("SELECT count() FROM %s FINAL WHERE tenant = 'team-b' AND started_ns = %d AND ended_ns = %d",
		tables.Allocations, s.UnixNano(), finish.UnixNano())); n != 1 {
		t.Errorf("infer's allocation is not [%s, %s), the container's start and finish", s.Format(time.RFC3339), finish.Format(time.RFC3339))
	}

	// The window's samples are stored (both instances, to its end) before the restart's gap.
	end := s.Add(k8sWindow)
	waitUntil(t, ctx, "the window's samples stored", func() bool {
		return queryCount(t, ctx, db, fmt.Sprintf("SELECT uniqExact(instance_id) FROM %s WHERE ts_ns >= %d", tables.Samples, end.UnixNano())) == 2
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

	// The report per namespace, once the window is past the attribution delay.
	sleepUntil(t, ctx, end.Add(attribution.DefaultDelay+time.Second))
	r := apptest.Report(t, ctx, db.DSN, "--scenario", scenario, "--from", s.Format(time.RFC3339), "--to", end.Format(time.RFC3339))
	wantReport := k8sExpectedReport(t, s, end, []k8sBilled{
		{tenant: "team-a", tier: "budget", multiplier: 0.7, seconds: k8sWindow.Seconds(), efficiency: 0.5},
		{tenant: "team-b", tier: "pro", multiplier: 1, seconds: k8sInferFor.Seconds(), efficiency: 0.25},
	})
	if d := compareReports(parseCSV(t, r.Stdout), wantReport, sc.Interval.Seconds()); len(d) > 0 {
		t.Errorf("report per namespace differs from the pods' times:\n  %s\ngot:\n%s", strings.Join(d, "\n  "), r.Stdout)
	}

	// Only lists and watches of the node's pods: one each per exporter start, never polling.
	requests := podRequests(t, ctx, api)
	lists, watches := requests["LIST"]-requestsBefore["LIST"], requests["WATCH"]-requestsBefore["WATCH"]+requests["WATCH open"]-requestsBefore["WATCH open"]
	minutes := time.Since(measuredFrom).Minutes()
	t.Logf("API server pod requests over %.1f min (2 exporter starts): %v lists, %v watches (completed + open): %.1f requests/min",
		minutes, lists, watches, (lists+watches)/minutes)
	if lists > 4 || watches > 4 || requests["GET"]-requestsBefore["GET"] > 0 {
		t.Errorf("pod requests: %v lists, %v watches, %v gets; want a list and a watch per exporter start (2 starts), no polling",
			lists, watches, requests["GET"]-requestsBefore["GET"])
	}
}

// k8sBilled is what a namespace's pods hold over the window.
type k8sBilled struct {
	tenant, tier        string
	multiplier, seconds float64
	efficiency          float64
}

// k8sExpectedReport is the report of k8sScenario's window [from, to) for tenants holding one
// 3g.20gb instance each, priced as README's "Definitions" say: billed fraction 3/7, overhead
// 1 − (instance SMs / GPU SMs) / (3/7), fully measured, no cold start, the GPU capacity all
// the window.
func k8sExpectedReport(t *testing.T, from, to time.Time, tenants []k8sBilled) [][]string {
	t.Helper()
	model, ok := hardware.Lookup("A100-SXM4-40GB")
	if !ok {
		t.Fatal("no A100-SXM4-40GB")
	}
	const price = 1.60
	prof := model.MIG["3g.20gb"]
	fraction := float64(prof.ComputeSlices) / hardware.MaxComputeSlices
	o := 1 - float64(prof.SMs)/float64(model.SMs)/fraction
	f6 := func(v float64) string { return strconv.FormatFloat(v, 'f', 6, 64) }
	ws, we := from.Format(time.RFC3339), to.Format(time.RFC3339)
	out := [][]string{strings.Split("tenant,tier,window_start,window_end,allocated_seconds,list_cost,cost,waste_cost,overhead_cost,efficiency,jitter_p99_ms,cold_start_max_s,cold_start_breaches,unmetered_seconds,currency", ",")}
	allocated := 0.0
	for _, b := range tenants {
		list := price * fraction * b.seconds / 3600
		cost := list * b.multiplier
		allocated += list
		out = append(out, []string{b.tenant, b.tier, ws, we, strconv.FormatFloat(b.seconds, 'f', 3, 64), f6(list), f6(cost),
			f6(cost * (1 - o) * (1 - b.efficiency)), f6(cost * o), strconv.FormatFloat(b.efficiency, 'f', 4, 64), "0.000", "0.000", "0", "0.000", "USD"})
	}
	capacity := price * to.Sub(from).Hours()
	return append(out, []string{"__unallocated__", "", ws, we, "", f6(capacity - allocated), "", "", "", "", "", "", "", "", "USD"})
}

// podRequests are the API server's requests on pods by verb (LIST, WATCH, GET… completed; "WATCH
// open": the watches open now), from its /metrics.
func podRequests(t *testing.T, ctx context.Context, api *local.KubeAPIServer) map[string]float64 {
	t.Helper()
	hc, err := api.HTTPClient()
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, api.URL()+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+api.Token())
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	verb := regexp.MustCompile(`verb="([A-Z]+)"`)
	for _, l := range strings.Split(string(b), "\n") {
		name, _, _ := strings.Cut(l, "{")
		if !strings.Contains(l, `resource="pods"`) || !strings.Contains(l, `subresource=""`) && strings.Contains(l, "subresource=") {
			continue
		}
		m := verb.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
		if err != nil {
			continue
		}
		switch name {
		case "apiserver_request_total":
			out[m[1]] += v
		case "apiserver_longrunning_requests":
			out[m[1]+" open"] += v
		}
	}
	return out
}

// sleepUntil waits for the wall clock to pass at.
func sleepUntil(t *testing.T, ctx context.Context, at time.Time) {
	t.Helper()
	select {
	case <-ctx.Done():
		t.Fatalf("the test's deadline came before %s", at.Format(time.RFC3339))
	case <-time.After(time.Until(at)):
	}
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
