package kubernetes

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/slicemeter/slicemeter/schemas/allocation"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
	"github.com/slicemeter/slicemeter/schemas/validate"
)

// TestDiscoveryRefusesPodTimesOutOfRange: a pod whose times lie outside 2000-01-01..2106-02-07
// (a node clock never set, or set centuries ahead) is refused and dead-lettered naming the
// field and the time as the API server gave it, before its times become nanoseconds: a pod
// started in 2610 was published as one started in 2026 (UnixNano wraps after 2262).
func TestDiscoveryRefusesPodTimesOutOfRange(t *testing.T) {
	for _, tc := range []struct {
		name    string
		started time.Time
		field   string
		quoted  string
	}{
		{"started in 2610", time.Date(2610, 8, 1, 0, 0, 0, 0, time.UTC), "requested_at", "2610-07-31T23:59:30Z"},
		{"started in 1999", time.Date(1999, 12, 31, 0, 0, 0, 0, time.UTC), "requested_at", "1999-12-30T23:59:30Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t, runningPod("team-a", "train", uidA, nil, "main", cidA, tc.started))
			f.kubelet.Set([]*podresourcesv1.PodResources{podRes("team-a", "train", map[string]map[string][]string{
				"main": {"nvidia.com/gpu": {gpuA}}})})
			d := f.start(nil)
			d.Refresh(ctx, t0.Add(tHour))
			msgs := f.out.take()
			if got := events(t, msgs, pb.TopicAllocations); len(got) != 0 {
				t.Fatalf("published %v, want the allocation refused", got)
			}
			dead := events(t, msgs, pb.TopicDeadLetter)
			if len(dead) != 1 {
				t.Fatalf("dead-lettered %d, want 1", len(dead))
			}
			// The dead letter's nanoseconds saturate rather than wrap: replayed, it is refused again.
			if at := time.Unix(0, dead[0].RequestedAtNs); !at.Before(validate.MinTimestamp) && !at.After(validate.MaxTime) {
				t.Errorf("dead letter requested_at_ns %d (%s): a valid-looking time for %s", dead[0].RequestedAtNs, at.UTC(), tc.started)
			}
			for _, m := range msgs {
				if m.Topic != pb.TopicDeadLetter {
					continue
				}
				if header(m, headerReason) != reasonInvalid || header(m, headerField) != tc.field || !strings.Contains(header(m, headerReasonDetail), tc.quoted) {
					t.Errorf("dead letter headers %v: want reason invalid, field %s and a detail quoting %s", m.Headers, tc.field, tc.quoted)
				}
			}
		})
	}
}

// TestDiscoveryRefusesVersionsPastTheBound: an event whose version no change could follow (a
// state file's version + 1 past 2^63-1) is dead-lettered naming version, as the collector
// would refuse it; the highest accepted version is published.
func TestDiscoveryRefusesVersionsPastTheBound(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	d := f.start(nil)
	a := allocation.Allocation{ID: "k8s/x/main/" + gpuA, Tenant: "team-a", Tier: "pro", Node: node, Instance: gpuA, RequestedAt: t0, StartedAt: t0}
	b := a
	b.ID, b.Instance = "k8s/y/main/"+gpuB, gpuB
	d.publish(ctx, t0, []Event{{Allocation: a, Version: math.MaxInt64 + 1}, {Allocation: b, Version: math.MaxInt64}})
	msgs := f.out.take()
	if got := events(t, msgs, pb.TopicAllocations); len(got) != 1 || got[0].AllocationId != b.ID || got[0].Version != math.MaxInt64 {
		t.Errorf("published %v, want only %s at version 2^63-1", got, b.ID)
	}
	for _, m := range msgs {
		if m.Topic == pb.TopicDeadLetter && (header(m, headerField) != "version" || !strings.Contains(header(m, headerReasonDetail), "9223372036854775808")) {
			t.Errorf("dead letter headers %v: want field version and the version in the detail", m.Headers)
		}
	}
	if dead := events(t, msgs, pb.TopicDeadLetter); len(dead) != 1 || dead[0].AllocationId != a.ID {
		t.Errorf("dead-lettered %v, want %s", dead, a.ID)
	}
}
