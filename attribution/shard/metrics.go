package shard

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the replica's share, registered when it starts so that they exist before the
// first generation.
type metrics struct {
	partitions prometheus.Gauge
	generation prometheus.Gauge
	rebalances prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		partitions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "slicemeter_attribution_shard_partitions",
			Help: "Partitions of the attribution shard topic this replica owns now (it attributes the nodes that fall in them); 0 between generations.",
		}),
		generation: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "slicemeter_attribution_shard_generation",
			Help: "Generation of the attribution shard consumer group this replica last joined (0: none yet).",
		}),
		rebalances: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slicemeter_attribution_shard_rebalances_total",
			Help: "Generations of the attribution shard consumer group this replica joined: each is a rebalance that may move nodes between replicas.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.partitions, m.generation, m.rebalances} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering the attribution shard metrics: %w", err)
		}
	}
	return m, nil
}
