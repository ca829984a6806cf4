// Package service is the exporter service: it opens the source a Config names (this node's
// GPUs through NVML, a simulated scenario or a replayed capture, optionally recording what NVML
// returned), samples it on the source's clock into the sinks (the Prometheus collector, the
// Kafka publisher with its spool, a run summary), serves /metrics, /healthz and /readyz, and
// delivers what is still spooled before it returns.
package service

import (
	"sync/atomic"
	"time"

	"github.com/slicemeter/slicemeter/exporter/kubernetes"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
	"github.com/slicemeter/slicemeter/internal/webserver"
	"github.com/slicemeter/slicemeter/schemas/scenario"
)

// Config is everything the exporter's flags set. Its problems are usage errors (package usage).
type Config struct {
	// Source is where samples come from: "nvml", "sim" or "replay"; empty: "sim" with a
	// ScenarioPath or Scenario, "replay" with a Replay file, else "nvml" (SourceOf).
	Source string

	// Scenario is the scenario of Source "sim", already loaded; nil: loaded from ScenarioPath.
	Scenario     *scenario.Scenario
	ScenarioPath string
	SimNode      string // simulate only this node of the scenario (empty: every node)
	SimStart     string // move the scenario to start then: "now" or an RFC 3339 time; empty: as written
	Fast         bool   // run the simulated clock as fast as possible instead of in real time
	// SimAllocations publishes the scenario's allocations on the allocations topic as a
	// scheduler would (each repetition of a looping scenario as it starts), so that a
	// standalone simulated fleet bills its tenants. The demo announces them itself.
	SimAllocations bool

	Node        string        // node name in the samples of Source "nvml"
	NVMLLibrary string        // path of libnvidia-ml.so.1 (empty: the loader's search, then the driver directories)
	Interval    time.Duration // sampling interval of Source "nvml"
	Duration    time.Duration // Source "nvml": stop after sampling this long (0: until ctx ends)

	// Record is a capture file to record what NVML returned into (Source "nvml", or "sim" with
	// one node without outages).
	Record     string
	Replay     string // capture file of Source "replay"
	ReplayFast bool   // replay as fast as possible instead of at the recorded timing

	Summary string // a JSON summary of the run is written to this file at every flush (empty: none)

	Brokers []string // Kafka brokers; none: serve /metrics only
	// Kafka is the --kafka.tls.* and --kafka.sasl.* flags: how every connection is secured.
	Kafka         kafkaconn.SecurityConfig
	Partitions    int           // of the samples topic, when it has to be created
	FlushInterval time.Duration // sampled time that goes into one SampleBatch per node
	SpoolDir      string        // disk spool for Kafka outages (empty: the memory queue)
	SpoolMaxBytes int64
	QueueMaxBytes int64 // without SpoolDir: size limit of the memory queue (0: none, a failed flush is dropped)
	// MaxMessageBytes overrides the samples topic's max.message.bytes (0: read from the topic
	// once Kafka is reached): batches are split to fit it.
	MaxMessageBytes int64
	// DrainTimeout bounds the delivery of what is still queued once sampling ends (0: 30 s);
	// Run fails if something is left.
	DrainTimeout time.Duration

	// Kubernetes is the --kubernetes.* flags; nil or not Enabled: no discovery.
	Kubernetes *kubernetes.Flags

	// Web is where /metrics, /healthz and /readyz are served; nil: nowhere (the caller serves
	// the registry).
	Web *webserver.Flags
	// Ready, if set, is set once sampling starts (for a caller that serves its own /readyz).
	Ready *atomic.Bool
}
