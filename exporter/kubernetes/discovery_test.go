package kubernetes

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/slicemeter/slicemeter/exporter/kubernetes/kubelettest"
	"github.com/slicemeter/slicemeter/schemas/audit/door"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

const (
	gpuA  = "GPU-11111111-2222-3333-4444-555555555555"
	gpuB  = "GPU-66666666-7777-8888-9999-000000000000"
	migA  = "MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
	node  = "node-1"
	cidA  = "3f9a1c0b8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a3928170605f4e3"
	uidA  = "5c8f3b2a-1d4e-4f60-8a7b-9c0d1e2f3a4b"
	uidB  = "0a1b2c3d-4e5f-4061-8273-94a5b6c7d8e9"
	tHour = time.Hour
)

var t0 = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// recorder is a Kafka writer that keeps what it was given (fail: refuse it).
type recorder struct {
	mu   sync.Mutex
	msgs []kafka.Message
	fail error
}

func (r *recorder) WriteMessages(_ context.Context, msgs ...kafka.Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return r.fail
	}
	r.msgs = append(r.msgs, msgs...)
	return nil
}

func (r *recorder) take() []kafka.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.msgs
	r.msgs = nil
	return m
}

func events(t *testing.T, msgs []kafka.Message, topic string) []*pb.AllocationEvent {
	t.Helper()
	var out []*pb.AllocationEvent
	for _, m := range msgs {
		if m.Topic != topic {
			continue
		}
		var e pb.AllocationEvent
		if err := proto.Unmarshal(m.Value, &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, &e)
	}
	return out
}

func header(m kafka.Message, key string) string {
	for _, h := range m.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func runningPod(ns, name, uid string, labels map[string]string, container, cid string, started time.Time) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid), Labels: labels, CreationTimestamp: metav1.NewTime(started.Add(-30 * time.Second))},
		Spec:       corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
			Name: container, ContainerID: "containerd://" + cid, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}},
		}}},
	}
}

type fixture struct {
	t       *testing.T
	kubelet *kubelettest.Server
	client  *fake.Clientset
	out     *recorder
	dir     string
	flags   *Flags
	logger  *slog.Logger // nil: discarded
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newFixture(t *testing.T, pods ...*corev1.Pod) *fixture {
	objs := make([]runtime.Object, 0, len(pods))
	for _, p := range pods {
		objs = append(objs, p)
	}
	f := &fixture{t: t, client: fake.NewSimpleClientset(objs...), out: &recorder{}}
	if t != nil {
		f.kubelet, f.dir = startKubelet(t), t.TempDir()
	} else {
		f.kubelet = &kubelettest.Server{}
	}
	f.flags = &Flags{Enabled: true, Socket: f.kubelet.Socket, NodeName: node, Labels: Labels{DefaultTier: "pro", Tier: "slicemeter.io/tier"},
		ProcRoot: filepath.Join(f.dir, "proc"), Refresh: time.Minute, StateDir: f.dir}
	return f
}

// start makes a Discovery over the fixture (a fresh one: an exporter restart) with its
// informer running until the test ends, and waits for the informer's first list.
func (f *fixture) start(reg prometheus.Registerer) *Discovery {
	f.t.Helper()
	kub, err := DialPodResources(f.flags.Socket)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = kub.Close() })
	logger := f.logger
	if logger == nil {
		logger = discardLogger()
	}
	d, err := New(Config{Flags: f.flags, Client: f.client.CoreV1().Pods(metav1.NamespaceAll), Kubelet: kub, Writer: f.out, Registry: reg, Logger: logger})
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.t.Cleanup(cancel)
	go d.pods.Run(ctx)
	waitFor(f.t, "the informer's first list", d.pods.Synced)
	return d
}

// waitFor waits for cond, which the informer makes true soon; the bound only stops a broken
// test, it is not what the test checks.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after a minute", what)
		}
	}
}

func TestDiscoveryPublishesOnceAndEnds(t *testing.T) {
	ctx := context.Background()
	train := runningPod("team-a", "train", uidA, map[string]string{"slicemeter.io/tier": "budget"}, "main", cidA, t0)
	infer := runningPod("team-b", "infer", uidB, nil, "srv", strings.Repeat("b", 64), t0.Add(time.Minute))
	f := newFixture(t, train, infer)
	f.kubelet.Set([]*podresourcesv1.PodResources{
		podRes("team-a", "train", map[string]map[string][]string{"main": {"nvidia.com/gpu": {gpuA}}}),
		podRes("team-b", "infer", map[string]map[string][]string{"srv": {"nvidia.com/mig-1g.10gb": {migA}}}),
	})
	reg := prometheus.NewPedanticRegistry()
	d := f.start(reg)
	d.Refresh(ctx, t0.Add(tHour))

	msgs := f.out.take()
	got := events(t, msgs, pb.TopicAllocations)
	if len(got) != 2 {
		t.Fatalf("published %d events, want 2: %v", len(got), got)
	}
	want := map[string]*pb.AllocationEvent{
		"k8s/" + uidA + "/main/" + gpuA: {Tenant: "team-a", Tier: "budget", Node: node, InstanceId: gpuA,
			RequestedAtNs: t0.Add(-30 * time.Second).UnixNano(), StartedAtNs: t0.UnixNano(), Version: 1},
		"k8s/" + uidB + "/srv/" + migA: {Tenant: "team-b", Tier: "pro", Node: node, InstanceId: migA,
			RequestedAtNs: t0.Add(30 * time.Second).UnixNano(), StartedAtNs: t0.Add(time.Minute).UnixNano(), Version: 1},
	}
	for _, e := range got {
		w := want[e.AllocationId]
		if w == nil || e.Tenant != w.Tenant || e.Tier != w.Tier || e.Node != w.Node || e.InstanceId != w.InstanceId ||
			e.RequestedAtNs != w.RequestedAtNs || e.StartedAtNs != w.StartedAtNs || e.EndedAtNs != 0 || e.Version != w.Version {
			t.Errorf("event %v; want %v", e, w)
		}
	}
	for _, m := range msgs {
		if header(m, door.HeaderDoor) != string(door.Kubernetes) || header(m, door.HeaderPrincipal) != "node/"+node {
			t.Errorf("message headers %v: want door kubernetes, principal node/%s", m.Headers, node)
		}
		if string(m.Key) == "" {
			t.Errorf("message without the tenant as key")
		}
	}
	if err := testutil.CollectAndCompare(reg, strings.NewReader(`
# HELP slicemeter_instance_pod_info 1 for each instance a running container holds, with its pod: join on node and slice to label any instance series with namespace, pod and container.
# TYPE slicemeter_instance_pod_info gauge
slicemeter_instance_pod_info{container="main",kind="gpu",namespace="team-a",node="node-1",pod="train",slice="`+gpuA+`"} 1
slicemeter_instance_pod_info{container="srv",kind="mig",namespace="team-b",node="node-1",pod="infer",slice="`+migA+`"} 1
`), "slicemeter_instance_pod_info"); err != nil {
		t.Error(err)
	}

	// The next refresh, and a restarted exporter re-listing everything, publish nothing.
	d.Refresh(ctx, t0.Add(tHour+time.Minute))
	if m := f.out.take(); len(m) != 0 {
		t.Errorf("second refresh published %d messages, want none", len(m))
	}
	d2 := f.start(nil)
	d2.Refresh(ctx, t0.Add(tHour+2*time.Minute))
	if m := f.out.take(); len(m) != 0 {
		t.Errorf("restarted exporter published %d messages, want none", len(m))
	}

	// Deleting a pod ends its allocation, at version 2.
	if err := f.client.CoreV1().Pods("team-b").Delete(ctx, "infer", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the deletion in the informer", func() bool { return d2.pods.Gone()[uidB] != nil })
	d2.Refresh(ctx, t0.Add(2*tHour))
	ended := events(t, f.out.take(), pb.TopicAllocations)
	if len(ended) != 1 || ended[0].AllocationId != "k8s/"+uidB+"/srv/"+migA || ended[0].EndedAtNs == 0 || ended[0].Version != 2 {
		t.Fatalf("after deletion published %v; want the end of the infer allocation at version 2", ended)
	}
	d2.Refresh(ctx, t0.Add(2*tHour+time.Minute))
	if m := f.out.take(); len(m) != 0 {
		t.Errorf("refresh after the end published %d messages, want none", len(m))
	}
}

func TestDiscoveryEndsPodsDeletedWhileDown(t *testing.T) {
	ctx := context.Background()
	train := runningPod("team-a", "train", uidA, nil, "main", cidA, t0)
	f := newFixture(t, train)
	f.kubelet.Set([]*podresourcesv1.PodResources{podRes("team-a", "train", map[string]map[string][]string{"main": {"nvidia.com/gpu": {gpuA}}})})
	d := f.start(nil)
	last := t0.Add(tHour)
	d.Refresh(ctx, last)
	if got := events(t, f.out.take(), pb.TopicAllocations); len(got) != 1 {
		t.Fatalf("published %v, want one allocation", got)
	}
	// The exporter is down; meanwhile the pod goes away (the kubelet no longer lists it).
	if err := f.client.CoreV1().Pods("team-a").Delete(ctx, "train", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.kubelet.Set(nil)
	f.client = fake.NewSimpleClientset() // the informer of the new start never sees the pod
	d2 := f.start(nil)
	d2.Refresh(ctx, t0.Add(3*tHour))
	got := events(t, f.out.take(), pb.TopicAllocations)
	if len(got) != 1 || got[0].EndedAtNs != last.UnixNano() || got[0].Version != 2 {
		t.Fatalf("after the restart published %v; want the allocation ended at the last refresh that saw it (%s), version 2", got, last)
	}
	d2.Refresh(ctx, t0.Add(3*tHour+time.Minute))
	if m := f.out.take(); len(m) != 0 {
		t.Errorf("published %d more messages, want none", len(m))
	}
	st, err := LoadState(filepath.Join(f.dir, StateFile))
	if err != nil || len(st.Sent) != 0 {
		t.Errorf("state after the end: %v, %v; want nothing left to remember", st.Sent, err)
	}
}

func TestDiscoveryBadInputAndFaults(t *testing.T) {
	ctx := context.Background()
	unlabelled := runningPod("team-a", "train", uidA, nil, "main", cidA, t0)
	f := newFixture(t, unlabelled)
	f.flags.Labels.Tenant = "slicemeter.io/tenant" // absent on the pod: no tenant
	f.kubelet.Set([]*podresourcesv1.PodResources{podRes("team-a", "train", map[string]map[string][]string{
		"main": {"nvidia.com/gpu": {gpuA, "MIG-GPU-11111111-2222-3333-4444-555555555555/1/0"}}})})
	reg := prometheus.NewPedanticRegistry()
	d := f.start(reg)
	d.Refresh(ctx, t0.Add(tHour))
	msgs := f.out.take()
	if n := len(events(t, msgs, pb.TopicAllocations)); n != 0 {
		t.Errorf("published %d allocations of a pod without a tenant, want none", n)
	}
	dead := events(t, msgs, pb.TopicDeadLetter)
	if len(dead) != 1 {
		t.Fatalf("dead-lettered %d, want 1", len(dead))
	}
	for _, m := range msgs {
		if m.Topic == pb.TopicDeadLetter && (header(m, headerReason) != reasonInvalid || header(m, headerField) != "tenant" || header(m, headerReasonDetail) == "") {
			t.Errorf("dead letter headers %v: want reason invalid, field tenant and a detail", m.Headers)
		}
	}
	d.Refresh(ctx, t0.Add(tHour+time.Minute)) // refused once, not again until it changes
	if m := f.out.take(); len(m) != 0 {
		t.Errorf("second refresh sent %d messages, want none", len(m))
	}
	if err := testutil.CollectAndCompare(reg, strings.NewReader(`
# HELP slicemeter_exporter_kubernetes_allocations_refused_total Allocations of pods refused and dead-lettered with the reason, by field: the validator's (e.g. tenant: a namespace or label that is not a tenant name), or instance_id: the instance is held by another container at the same time (a time-sliced MIG device in several pods).
# TYPE slicemeter_exporter_kubernetes_allocations_refused_total counter
slicemeter_exporter_kubernetes_allocations_refused_total{field="instance_id"} 0
slicemeter_exporter_kubernetes_allocations_refused_total{field="tenant"} 1
slicemeter_exporter_kubernetes_allocations_refused_total{field="tier"} 0
# HELP slicemeter_exporter_kubernetes_unmapped_devices_total NVIDIA device ids the kubelet assigned that map to no instance (each is named once in the log), counted per refresh.
# TYPE slicemeter_exporter_kubernetes_unmapped_devices_total counter
slicemeter_exporter_kubernetes_unmapped_devices_total 2
`), "slicemeter_exporter_kubernetes_allocations_refused_total", "slicemeter_exporter_kubernetes_unmapped_devices_total"); err != nil {
		t.Error(err)
	}
	if m := d.Missing(); len(m) != 0 {
		t.Errorf("Missing = %q with both sources there", m)
	}

	// The kubelet's socket goes away: the discovery says so and keeps what it knew.
	if err := os.Remove(f.kubelet.Socket); err != nil {
		t.Fatal(err)
	}
	bad := *f.flags
	bad.Socket = filepath.Join(f.dir, "absent.sock")
	f.flags = &bad
	d2 := f.start(nil)
	d2.Refresh(ctx, t0.Add(2*tHour))
	if m := d2.Missing(); len(m) != 1 || !strings.Contains(m[0], "absent.sock") {
		t.Errorf("Missing = %q; want the kubelet socket named", m)
	}
}

func TestDiscoveryAPIServerUnreachable(t *testing.T) {
	kub, err := DialPodResources(filepath.Join(t.TempDir(), "absent.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer kub.Close()
	// A kubeconfig-less client of a port nothing listens on.
	flags := &Flags{Enabled: true, NodeName: node, Labels: Labels{DefaultTier: "pro"}, Refresh: time.Minute,
		Kubeconfig: writeKubeconfig(t, "https://127.0.0.1:1")}
	client, err := flags.Client()
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	d, err := New(Config{Flags: flags, Client: client, Kubelet: kub, Registry: reg, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go d.pods.Run(ctx)
	waitFor(t, "a failed list", func() bool { return d.pods.Err() != nil })
	d.Refresh(ctx, t0)
	m := d.Missing()
	if len(m) != 2 || !strings.Contains(m[0], "API server") || !strings.Contains(m[0], "127.0.0.1:1") {
		t.Errorf("Missing = %q; want the API server (named) and the kubelet", m)
	}
	if n, err := testutil.GatherAndCount(reg, "slicemeter_instance_pod_info"); err != nil || n != 0 {
		t.Errorf("pod info series: %d, %v; want none and no error", n, err)
	}
}

func writeKubeconfig(t *testing.T, server string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"" + server + "\", insecure-skip-tls-verify: true}}]\n" +
		"users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestShares(t *testing.T) {
	ctx := context.Background()
	pod := runningPod("team-a", "notebook", uidA, nil, "main", cidA, t0)
	f := newFixture(t, pod)
	f.kubelet.Set([]*podresourcesv1.PodResources{podRes("team-a", "notebook", map[string]map[string][]string{"main": {"nvidia.com/gpu": {gpuA + "::2"}}})},
		&podresourcesv1.ContainerDevices{ResourceName: "nvidia.com/gpu", DeviceIds: []string{gpuA + "::0", gpuA + "::1", gpuA + "::2", gpuA + "::3", gpuB}})
	writeProc(t, f.flags.ProcRoot, 4242, "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"+strings.ReplaceAll(uidA, "-", "_")+".slice/cri-containerd-"+cidA+".scope\n")
	writeProc(t, f.flags.ProcRoot, 1, "0::/init.scope\n")
	d := f.start(nil)
	d.Refresh(ctx, t0.Add(tHour))
	s := d.Shares().Share(gpuA)
	if s.Replicas != 4 || len(s.IDs) != 4 || s.IDs[2] != gpuA+"::2" {
		t.Fatalf("Share(%s) = %+v; want its 4 replicas", gpuA, s)
	}
	if id, ok := s.Replica(4242); !ok || id != gpuA+"::2" {
		t.Errorf("Replica(4242) = %q, %v; want the notebook's replica %s::2", id, ok, gpuA)
	}
	for _, pid := range []uint32{1, 999} { // a host process; one that is gone
		if id, ok := s.Replica(pid); ok {
			t.Errorf("Replica(%d) = %q; want none", pid, id)
		}
	}
	if s := d.Shares().Share(gpuB); s.Replicas != 0 {
		t.Errorf("Share(%s) = %+v; a whole GPU is not shared", gpuB, s)
	}
	if got := events(t, f.out.take(), pb.TopicAllocations); len(got) != 1 || got[0].InstanceId != gpuA+"::2" {
		t.Errorf("published %v; want the replica's allocation", got)
	}
}

func writeProc(t *testing.T, root string, pid int, cgroup string) {
	t.Helper()
	dir := filepath.Join(root, strconv.Itoa(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup"), []byte(cgroup), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A sidecar (a restartable init container, which the kubelet lists with its devices) holding a
// replica of a time-sliced GPU: its allocation is published, its processes map to its replica
// and the pod info series names it; once a classic init container has completed, its
// allocation is ended while the pod runs on and it leaves the pod info series.
func TestDiscoveryInitContainers(t *testing.T) {
	ctx := context.Background()
	always := corev1.ContainerRestartPolicyAlways
	cidS, cidI := strings.Repeat("c", 64), strings.Repeat("d", 64)
	pod := runningPod("team-a", "notebook", uidA, nil, "main", cidA, t0.Add(time.Minute))
	pod.CreationTimestamp = metav1.NewTime(t0.Add(-30 * time.Second)) // before its init containers
	pod.Spec.InitContainers = []corev1.Container{{Name: "setup"}, {Name: "proxy", RestartPolicy: &always}}
	pod.Status.InitContainerStatuses = []corev1.ContainerStatus{
		{Name: "setup", ContainerID: "containerd://" + cidI, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(t0)}}},
		{Name: "proxy", ContainerID: "containerd://" + cidS, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(t0)}}},
	}
	f := newFixture(t, pod)
	f.kubelet.Set([]*podresourcesv1.PodResources{podRes("team-a", "notebook", map[string]map[string][]string{
		"setup": {"nvidia.com/gpu": {gpuB}}, "proxy": {"nvidia.com/gpu": {gpuA + "::1"}}})},
		&podresourcesv1.ContainerDevices{ResourceName: "nvidia.com/gpu", DeviceIds: []string{gpuA + "::0", gpuA + "::1", gpuB}})
	writeProc(t, f.flags.ProcRoot, 4242, "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"+strings.ReplaceAll(uidA, "-", "_")+".slice/cri-containerd-"+cidS+".scope\n")
	reg := prometheus.NewPedanticRegistry()
	d := f.start(reg)
	d.Refresh(ctx, t0.Add(tHour))

	got := map[string]*pb.AllocationEvent{}
	for _, e := range events(t, f.out.take(), pb.TopicAllocations) {
		got[e.AllocationId] = e
	}
	sidecarID, initID := "k8s/"+uidA+"/proxy/"+gpuA+"::1", "k8s/"+uidA+"/setup/"+gpuB
	if e := got[sidecarID]; len(got) != 2 || e == nil || e.StartedAtNs != t0.UnixNano() || e.EndedAtNs != 0 || e.Version != 1 {
		t.Fatalf("published %v; want the sidecar's %s and the init container's %s, running from %s", got, sidecarID, initID, t0)
	}
	if id, ok := d.Shares().Share(gpuA).Replica(4242); !ok || id != gpuA+"::1" {
		t.Errorf("Replica(4242) = %q, %v; want the sidecar's replica %s::1", id, ok, gpuA)
	}

	// The init container completes; the pod runs on.
	done := pod.DeepCopy()
	done.Status.InitContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 0, StartedAt: metav1.NewTime(t0), FinishedAt: metav1.NewTime(t0.Add(50 * time.Second))}}
	if _, err := f.client.CoreV1().Pods("team-a").UpdateStatus(ctx, done, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the status in the informer", func() bool {
		p := d.pods.List()[uidA]
		return p != nil && p.Status.InitContainerStatuses[0].State.Terminated != nil
	})
	d.Refresh(ctx, t0.Add(tHour+time.Minute))
	ended := events(t, f.out.take(), pb.TopicAllocations)
	if len(ended) != 1 || ended[0].AllocationId != initID || ended[0].EndedAtNs != t0.Add(50*time.Second).UnixNano() || ended[0].Version != 2 {
		t.Fatalf("after the init container completed published %v; want %s ended at its finish, version 2", ended, initID)
	}
	if err := testutil.CollectAndCompare(reg, strings.NewReader(`
# HELP slicemeter_instance_pod_info 1 for each instance a running container holds, with its pod: join on node and slice to label any instance series with namespace, pod and container.
# TYPE slicemeter_instance_pod_info gauge
slicemeter_instance_pod_info{container="proxy",kind="share",namespace="team-a",node="node-1",pod="notebook",slice="`+gpuA+`::1"} 1
`), "slicemeter_instance_pod_info"); err != nil {
		t.Error(err)
	}
}
