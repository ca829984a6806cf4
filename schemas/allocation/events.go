package allocation

import (
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// Event is an allocation event as the slicemeter.allocations.v1 topic carries it: one version
// of an allocation, or its deletion.
type Event struct {
	Allocation
	Version uint64 // increases with every change of one allocation id
	Deleted bool
}

// EventOf is the event a Kafka message carries.
func EventOf(e *pb.AllocationEvent) Event {
	return Event{
		Allocation: Allocation{
			ID: e.GetAllocationId(), Tenant: e.GetTenant(), Tier: e.GetTier(), Node: e.GetNode(), Instance: e.GetInstanceId(),
			RequestedAt: FromNS(e.GetRequestedAtNs()), StartedAt: FromNS(e.GetStartedAtNs()), EndedAt: FromNS(e.GetEndedAtNs()),
		},
		Version: e.GetVersion(),
		Deleted: e.GetDeleted(),
	}
}
