package scenario

import (
	"fmt"

	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// AllocationEvents are the scenario's allocations as a scheduler would announce them on
// slicemeter.allocations.v1: requested_at, started_at (ready) and ended_at in wall-clock ns.
// Ids are stable across runs of the same scenario, so republishing is idempotent.
func (s *Scenario) AllocationEvents() []*pb.AllocationEvent {
	var events []*pb.AllocationEvent
	for _, t := range s.Tenants {
		for i, a := range t.Allocations {
			events = append(events, &pb.AllocationEvent{
				AllocationId:  fmt.Sprintf("%s/%s/%d", s.Name, t.Name, i),
				Tenant:        t.Name,
				Tier:          t.Tier,
				Node:          a.Target.Node,
				InstanceId:    a.Target.Instance,
				RequestedAtNs: s.Start.Add(a.Requested).UnixNano(),
				StartedAtNs:   s.Start.Add(a.Ready).UnixNano(),
				EndedAtNs:     s.Start.Add(a.End).UnixNano(),
				Version:       1,
			})
		}
	}
	return events
}
