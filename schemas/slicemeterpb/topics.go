package slicemeterpb

// Kafka topics (README.md, "Kafka"). The version suffix changes only with an incompatible format.
const (
	TopicSamples     = "slicemeter.samples.v1"     // key: node; value: SampleBatch
	TopicAllocations = "slicemeter.allocations.v1" // key: tenant; value: AllocationEvent
	TopicDeadLetter  = "slicemeter.deadletter.v1"  // undecodable or invalid messages; reason in headers
)

// Kind names as they appear in ClickHouse, Prometheus labels and reports.
func (k Kind) Label() string {
	switch k {
	case Kind_KIND_GPU:
		return "gpu"
	case Kind_KIND_MIG:
		return "mig"
	case Kind_KIND_VGPU:
		return "vgpu"
	case Kind_KIND_SHARE:
		return "share"
	default:
		return "unknown"
	}
}
