package collector

import (
	"github.com/prometheus/client_golang/prometheus"

	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// metrics are the collector's own Prometheus metrics. They are registered on the registry
// given to New, never on the global one.
type metrics struct {
	consumed          *prometheus.CounterVec   // topic
	samplesStored     prometheus.Counter       //
	energyEstimated   prometheus.Counter       // stored samples whose energy is power × interval
	allocsStored      prometheus.Counter       //
	samplesDropped    *prometheus.CounterVec   // reason
	deadLettered      *prometheus.CounterVec   // topic, reason
	insertErrors      *prometheus.CounterVec   // table
	insertDuration    *prometheus.HistogramVec // table
	batchRows         *prometheus.HistogramVec // table
	deadLetterErrs    prometheus.Counter       //
	commitErrors      prometheus.Counter       //
	pendingMessages   prometheus.Gauge         //
	freshness         prometheus.Histogram     //
	consumerLag       *prometheus.GaugeVec     // topic, partition
	partitionsDropped prometheus.Counter
	retentionErrors   prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	const ns, sub = "slicemeter", "collector"
	m := &metrics{
		consumed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "messages_consumed_total",
			Help: "Kafka messages fetched, by topic.",
		}, []string{"topic"}),
		samplesStored: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "samples_stored_total",
			Help: "Sample rows inserted into ClickHouse.",
		}),
		energyEstimated: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "samples_energy_estimated_total",
			Help: "Sample rows inserted whose energy is estimated as power times interval, the GPU's energy counter not being read at both ends of the tick.",
		}),
		allocsStored: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "allocations_stored_total",
			Help: "Allocation rows inserted into ClickHouse.",
		}),
		samplesDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "samples_dropped_total",
			Help: "Samples not stored because they were invalid, by reason.",
		}, []string{"reason"}),
		deadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "deadlettered_total",
			Help: "Messages written to the dead-letter topic, by source topic and reason.",
		}, []string{"topic", "reason"}),
		insertErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "insert_errors_total",
			Help: "Failed ClickHouse inserts (each is retried), by table.",
		}, []string{"table"}),
		insertDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "insert_duration_seconds",
			Help:    "Duration of successful ClickHouse batch inserts, by table.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15), // 1 ms .. 16 s
		}, []string{"table"}),
		batchRows: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "batch_rows",
			Help:    "Rows per successful ClickHouse batch insert, by table.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 11), // 1 .. ~1M
		}, []string{"table"}),
		deadLetterErrs: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "deadletter_write_errors_total",
			Help: "Failed writes to the dead-letter topic (each is retried).",
		}),
		commitErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "commit_errors_total",
			Help: "Failed Kafka offset commits after a successful insert (the messages may be delivered again; inserts are idempotent).",
		}),
		pendingMessages: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "pending_messages",
			Help: "Messages fetched whose rows are not yet inserted and committed.",
		}),
		freshness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "sample_freshness_seconds",
			Help:    "End-to-end lag of stored samples: from the sample's timestamp to its insert into ClickHouse.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 1.5, 2, 3, 5, 10, 30, 60, 300, 1800},
		}),
		consumerLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: sub, Name: "consumer_lag_messages",
			Help: "Messages in a partition after the last one this collector committed, at fetch time, by topic and partition.",
		}, []string{"topic", "partition"}),
		partitionsDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "retention_partitions_dropped_total",
			Help: "Expired day partitions dropped from the samples and rollup tables.",
		}),
		retentionErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: sub, Name: "retention_errors_total",
			Help: "Failed retention rounds (retried at the next interval).",
		}),
	}
	m.startAtZero()
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{
		m.consumed, m.samplesStored, m.energyEstimated, m.allocsStored, m.samplesDropped, m.deadLettered,
		m.insertErrors, m.insertDuration, m.batchRows, m.deadLetterErrs, m.commitErrors,
		m.pendingMessages, m.freshness, m.consumerLag, m.partitionsDropped, m.retentionErrors,
	} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// startAtZero creates the drop and dead-letter series of every reason known at start, at 0:
// an alert on increase() then fires on the first one, which a series born at 1 would hide.
func (m *metrics) startAtZero() {
	sampleReasons := []string{reasonInvalid, reasonMissingInstanceID, reasonUnknownKind, reasonMissingTimestamp,
		reasonTimestampOutOfRange, reasonMissingInterval, reasonMissingNode}
	allocationReasons := []string{reasonInvalid, reasonMissingAllocationID, reasonMissingTenant, reasonMissingTier,
		reasonMissingNode, reasonMissingInstanceID, reasonStartedBeforeRequest, reasonEndedNotAfterStarted, reasonOverlap, reasonTenantMove}
	for _, r := range sampleReasons {
		m.samplesDropped.WithLabelValues(r)
	}
	for topic, reasons := range map[string][]string{pb.TopicSamples: sampleReasons, pb.TopicAllocations: allocationReasons} {
		m.deadLettered.WithLabelValues(topic, reasonDecode)
		for _, r := range reasons {
			m.deadLettered.WithLabelValues(topic, r)
		}
	}
}
