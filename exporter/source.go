// Package exporter is the per-node sampling side of slicemeter: a Source (real NVML, the
// simulator or a replayed capture) is read on every tick of a Clock, and each tick's samples go
// to the Sinks (the Prometheus snapshot, the Kafka publisher).
package exporter

import (
	"context"
	"time"

	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// Source reads every instance it sees at one tick.
type Source interface {
	// Read returns the samples of tick t (covering [t, t+interval)), grouped by node. A node
	// whose exporter is down returns nothing.
	Read(ctx context.Context, t time.Time, interval time.Duration) ([]NodeSamples, error)
}

// NodeSamples are one node's samples of one tick.
type NodeSamples struct {
	Node    string
	Samples []*pb.Sample
}

// Sink receives every tick's samples. Flush is called at the flush interval and at the end.
type Sink interface {
	Write(ctx context.Context, tick time.Time, samples []NodeSamples) error
	Flush(ctx context.Context) error
}
