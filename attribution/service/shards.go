package service

// Shards says which nodes this replica attributes when several attribution replicas share the
// fleet (package attribution/shard: a Kafka consumer group whose partition assignment names
// them). Without Shards (nil) one replica attributes every node.
//
// A minute of a node is computed from that node's samples and allocations alone, so replicas
// that both attribute a node (the moment of a rebalance) store the same figures, and the
// latest pass of each minute and node is what readers take.
type Shards interface {
	// Assignment is the nodes this replica owns now. ok is false while it owns none (not yet
	// joined, or between a rebalance's revocation and the next assignment): a pass then
	// attributes nothing and waits.
	Assignment() (a Assignment, ok bool)
}

// Assignment is one generation of a replica's share of the nodes.
type Assignment struct {
	// Generation changes with every rebalance: a replica that gains nodes catches up on them.
	Generation int64
	// Owns says whether this replica attributes the node.
	Owns func(node string) bool
}
