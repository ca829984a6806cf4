// Package kubernetes discovers, on a Kubernetes node, which container holds which GPU, MIG
// instance or time-sliced / MPS replica: from the kubelet's PodResources v1 API (its unix
// socket) and the node's pods (one client-go informer). From that it publishes the
// allocations (AllocationEvents, audited as door kubernetes), labels the instances' series with
// their pods (slicemeter_instance_pod_info) and maps processes to share replicas
// (exporter.Shares, through /proc/<pid>/cgroup). Nothing of it runs on the sampling or scrape
// path: a refresh on a timer and on pod events builds a view that every tick reads.
package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"

	"github.com/slicemeter/slicemeter/exporter"
	"github.com/slicemeter/slicemeter/internal/lograte"
	"github.com/slicemeter/slicemeter/schemas/allocation"
	"github.com/slicemeter/slicemeter/schemas/audit/door"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
	"github.com/slicemeter/slicemeter/schemas/validate"
)

// StateFile is the name of the state file in Flags.StateDir.
const StateFile = "kubernetes-allocations.json"

// Headers of a dead-lettered allocation, as the collector writes them (collector.HeaderReason…).
const (
	headerReason       = "slicemeter-reason"
	headerReasonDetail = "slicemeter-reason-detail"
	headerField        = "slicemeter-field"
	reasonInvalid      = "invalid"
	reasonOverlap      = "overlap"
	fieldInstance      = "instance_id"
)

// Writer is where messages go: a kafka.Writer without a topic of its own.
type Writer interface {
	WriteMessages(ctx context.Context, msgs ...kafka.Message) error
}

// Config is what a Discovery needs besides its flags.
type Config struct {
	Flags    *Flags
	Client   PodAPI // the API server
	Kubelet  *PodResources
	Writer   Writer // nil: no Kafka, allocations are only labelled on the series
	Registry prometheus.Registerer
	Logger   *slog.Logger
}

// Discovery keeps the node's holdings up to date and publishes their allocations.
type Discovery struct {
	cfg     Config
	f       *Flags
	pods    *Pods
	metrics *metrics
	logs    *lograte.Limiter
	state   string // file; empty: in memory only

	// Owned by Run's goroutine.
	holdings map[string]Holding // allocation id → holding
	st       State
	refused  map[string]allocation.Allocation // dead-lettered, not again until it changes
	unmapped map[string]bool                  // device ids logged already
	saved    time.Time

	view    atomic.Pointer[view]
	mu      sync.Mutex
	missing map[string]string // kubelet, apiserver → why
	pids    pidCache
}

// New prepares a discovery; Run starts it. A state file that cannot be read is an error; one
// that is read but corrupt is moved aside (MoveAside), logged, counted, and starts it empty.
func New(cfg Config) (*Discovery, error) {
	f := cfg.Flags
	if cfg.Logger != nil && f.NodeName != "" {
		cfg.Logger = cfg.Logger.With("node", f.NodeName) // its lines are about this node's pods and GPUs
	}
	d := &Discovery{cfg: cfg, f: f, logs: lograte.New(cfg.Logger, time.Minute), holdings: map[string]Holding{},
		refused: map[string]allocation.Allocation{}, unmapped: map[string]bool{},
		missing: map[string]string{"apiserver": "not synced yet", "kubelet": "not read yet"}}
	d.pids.root = f.ProcRoot
	d.metrics = newMetrics(cfg.Registry, d)
	d.pods = NewPods(cfg.Client, f.NodeName, d.metrics.request)
	if f.StateDir != "" {
		d.state = filepath.Join(f.StateDir, StateFile)
	}
	st, err := LoadState(d.state)
	if ce := (*CorruptStateError)(nil); errors.As(err, &ce) {
		// Not starting would stop the sampling too (a crash loop); starting empty costs replays.
		d.metrics.corruptState.Inc()
		attrs := []any{"path", d.state, "err", ce.Err}
		if to, merr := MoveAside(d.state, time.Now()); merr != nil {
			attrs = append(attrs, "move_err", merr) // the first save replaces it
		} else {
			attrs = append(attrs, "moved_to", to)
		}
		cfg.Logger.Error("Kubernetes discovery: the allocation state file is corrupt; starting empty: a running pod's allocations are published again (replays), a pod deleted while the exporter was down is not ended", attrs...)
		st, err = State{Sent: map[string]*Sent{}}, nil
	}
	if err != nil {
		return nil, err
	}
	d.st = st
	for id, s := range st.Sent {
		d.holdings[id] = s.Holding
	}
	d.view.Store(&view{shares: map[string]exporter.Share{}})
	return d, nil
}

// Run watches the pods and refreshes until ctx ends.
func (d *Discovery) Run(ctx context.Context) {
	go d.pods.Run(ctx)
	t := time.NewTicker(d.f.Refresh)
	defer t.Stop()
	for {
		d.Refresh(ctx, time.Now().UTC())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-d.pods.Changed():
		}
	}
}

// Missing is what the discovery lacks now (for /readyz): the kubelet's socket, the API server.
func (d *Discovery) Missing() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, k := range []string{"apiserver", "kubelet"} {
		if why, ok := d.missing[k]; ok {
			out = append(out, why)
		}
	}
	return out
}

func (d *Discovery) setMissing(ctx context.Context, now time.Time, what, why string) {
	d.mu.Lock()
	if why == "" {
		delete(d.missing, what)
	} else {
		d.missing[what] = why
	}
	d.mu.Unlock()
	up := 1.0
	if why != "" {
		up = 0
		// Retried at every refresh; said once a minute.
		d.logs.Log(ctx, now, slog.LevelWarn, what, "Kubernetes discovery: "+why+"; sampling and serving go on, retrying")
	}
	d.metrics.up.WithLabelValues(what).Set(up)
}

// Refresh reads the kubelet, compares with the informer's pods and publishes what changed.
func (d *Discovery) Refresh(ctx context.Context, now time.Time) {
	snap, kerr := d.cfg.Kubelet.Read(ctx, now)
	if kerr != nil {
		d.setMissing(ctx, now, "kubelet", kerr.Error())
	} else {
		d.setMissing(ctx, now, "kubelet", "")
	}
	if !d.pods.Synced() {
		why := "Kubernetes API server: the node's pods are not listed yet"
		if err := d.pods.Err(); err != nil {
			why += ": " + err.Error()
		}
		d.setMissing(ctx, now, "apiserver", why)
		return // no pod can be said to be gone before the first list
	}
	if err := d.pods.Err(); err != nil {
		d.setMissing(ctx, now, "apiserver", "Kubernetes API server: "+err.Error()+" (serving the last known pods)")
	} else {
		d.setMissing(ctx, now, "apiserver", "")
	}
	pods := d.pods.List()
	if kerr == nil {
		d.hold(snap, pods)
	}
	gone := d.pods.Gone()
	events := Changes(d.holdings, d.st.Sent, pods, gone, d.st.LastSeen, d.f.NodeName, d.f.Labels, now)
	changed, unsent := d.publish(ctx, now, events)
	d.forget(pods, gone, unsent)
	d.st.LastSeen = now
	if changed || now.Sub(d.saved) >= time.Minute {
		if err := d.st.Save(d.state); err != nil {
			d.logs.Log(ctx, now, slog.LevelError, "state", "Kubernetes discovery: the state is not saved: a restart may end pods deleted meanwhile later than they ended", "err", err)
		} else {
			d.saved = now
		}
	}
	d.view.Store(d.buildView(snap, kerr == nil, pods))
}

// hold adds the holdings the kubelet lists that are new.
func (d *Discovery) hold(snap Snapshot, pods map[string]*corev1.Pod) {
	byName := make(map[string]*corev1.Pod, len(pods))
	for _, p := range pods {
		byName[p.Namespace+"/"+p.Name] = p
	}
	for _, a := range snap.Assigned {
		dev, err := ParseDevice(a.DeviceID)
		if err != nil {
			d.metrics.unmapped.Inc()
			if !d.unmapped[a.DeviceID] {
				d.unmapped[a.DeviceID] = true
				d.cfg.Logger.Warn("Kubernetes discovery: a device id is not mapped to an instance", "resource", a.Resource,
					"namespace", a.Namespace, "pod", a.Pod, "container", a.Container, "err", err)
			}
			continue
		}
		p := byName[a.Namespace+"/"+a.Pod]
		if p == nil {
			continue // not in the informer yet: the next refresh
		}
		h := Holding{PodUID: string(p.UID), Namespace: a.Namespace, Pod: a.Pod, Container: a.Container, Device: a.DeviceID,
			Instance: dev.Instance, Kind: kindName(dev.Kind), GPU: dev.GPU}
		if _, ok := d.holdings[h.AllocationID()]; !ok {
			d.holdings[h.AllocationID()] = h
		}
	}
}

func kindName(k pb.Kind) string {
	return strings.ToLower(strings.TrimPrefix(k.String(), "KIND_"))
}

// publish validates the events with the one validator, dead-letters the refused ones and
// sends the others; it says whether the state changed, and which allocations are still to be
// sent (Kafka failed).
func (d *Discovery) publish(ctx context.Context, now time.Time, events []Event) (bool, map[string]bool) {
	if d.cfg.Writer == nil || len(events) == 0 {
		return false, nil
	}
	var (
		msgs []kafka.Message
		sent []Event
	)
	// What holds the instances already: every allocation sent, and those this batch sends.
	holders := make([]allocation.Allocation, 0, len(d.st.Sent)+len(events))
	for _, s := range d.st.Sent {
		holders = append(holders, s.Allocation)
	}
	// The earliest started holds an instance: later ones are the overlaps.
	events = slices.Clone(events)
	sort.SliceStable(events, func(i, j int) bool { return events[i].Allocation.StartedAt.Before(events[j].Allocation.StartedAt) })
	for _, e := range events {
		reason, field := reasonInvalid, ""
		err := e.Allocation.Validate("kubernetes", 0)
		var ae *allocation.Error
		if errors.As(err, &ae) {
			field = ae.Field
		}
		if err == nil {
			// A version past validate.MaxAllocationVersion (a state file's, + 1) is refused as
			// the collector would: a change could not be ordered after it.
			if r := validate.CheckAllocationVersion(e.Version); r != nil {
				err, field = r, r.Field
			}
		}
		if err == nil {
			// Two containers on one instance at once (MIG-<uuid>::<n> replicas of a time-sliced
			// MIG device in several pods): the later one is refused, as the collector would,
			// rather than each billed the whole instance.
			if err = allocation.FirstOverlap([]allocation.Allocation{e.Allocation}, holders); err != nil {
				reason, field = reasonOverlap, fieldInstance
			}
		}
		if err != nil {
			if prev, ok := d.refused[e.Allocation.ID]; ok && prev.Same(e.Allocation) {
				continue
			}
			d.refused[e.Allocation.ID] = e.Allocation
			d.metrics.refused.WithLabelValues(field).Inc()
			d.logs.Log(ctx, now, slog.LevelWarn, reason+":"+field, "Kubernetes discovery: an allocation is refused and dead-lettered",
				"namespace", e.Namespace, "pod", e.Pod, "container", e.Container, "device", e.Device, "reason", reason, "err", err)
			m := d.message(pb.TopicDeadLetter, e)
			m.Headers = append(m.Headers, kafka.Header{Key: headerReason, Value: []byte(reason)},
				kafka.Header{Key: headerField, Value: []byte(field)}, kafka.Header{Key: headerReasonDetail, Value: []byte(err.Error())})
			msgs = append(msgs, m)
			continue
		}
		delete(d.refused, e.Allocation.ID)
		holders = append(holders, e.Allocation)
		msgs = append(msgs, d.message(pb.TopicAllocations, e))
		sent = append(sent, e)
	}
	if len(msgs) == 0 {
		return false, nil
	}
	if err := d.cfg.Writer.WriteMessages(ctx, msgs...); err != nil {
		// Nothing is marked sent: the next refresh sends them again.
		d.metrics.publishErrors.Inc()
		for _, e := range events {
			delete(d.refused, e.Allocation.ID)
		}
		d.logs.Log(ctx, now, slog.LevelWarn, "kafka", "Kubernetes discovery: allocations not published yet; retrying", "events", len(msgs), "err", err)
		unsent := make(map[string]bool, len(events))
		for _, e := range events {
			unsent[e.Allocation.ID] = true
		}
		return false, unsent
	}
	for _, e := range sent {
		d.st.Sent[e.Allocation.ID] = &Sent{Holding: e.Holding, Allocation: e.Allocation, Version: e.Version}
	}
	d.metrics.published.Add(float64(len(sent)))
	return len(sent) > 0, nil
}

// message is e's AllocationEvent for topic, keyed by tenant as the topic's contract says, with
// the headers that make the collector audit it as door kubernetes.
func (d *Discovery) message(topic string, e Event) kafka.Message {
	a := e.Allocation
	v, err := proto.Marshal(&pb.AllocationEvent{AllocationId: a.ID, Tenant: a.Tenant, Tier: a.Tier, Node: a.Node, InstanceId: a.Instance,
		RequestedAtNs: allocation.ToNS(a.RequestedAt), StartedAtNs: allocation.ToNS(a.StartedAt), EndedAtNs: allocation.ToNS(a.EndedAt),
		Version: e.Version})
	if err != nil { // strings and numbers only: cannot happen
		panic(fmt.Sprintf("kubernetes: marshal allocation %q: %v", a.ID, err))
	}
	return kafka.Message{Topic: topic, Key: []byte(a.Tenant), Value: v, Headers: []kafka.Header{
		{Key: door.HeaderDoor, Value: []byte(door.Kubernetes)},
		{Key: door.HeaderPrincipal, Value: []byte("node/" + d.f.NodeName)},
	}}
}

// forget drops the holdings whose pod is gone and whose allocation has ended or never
// started, unless an event of theirs is still to be sent: nothing about them can change.
func (d *Discovery) forget(pods map[string]*corev1.Pod, gone map[string]*Gone, unsent map[string]bool) {
	live := map[string]bool{}
	for id, h := range d.holdings {
		s := d.st.Sent[id]
		if pods[h.PodUID] != nil || unsent[id] || s != nil && s.Allocation.EndedAt.IsZero() {
			live[h.PodUID] = true
			continue
		}
		delete(d.holdings, id)
		delete(d.st.Sent, id)
		delete(d.refused, id)
	}
	for uid := range gone {
		if !live[uid] {
			d.pods.Forget(uid)
		}
	}
}
