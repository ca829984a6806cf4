// Package door names the ways an allocation write comes in, and the Kafka headers by which a
// producer of allocation events says which one it is. It is apart from audit, which reads and
// writes the audit trail in ClickHouse, so that a producer (the exporter's Kubernetes
// discovery) sets the headers without linking the database driver.
package door

// Door is the way a write came in.
type Door string

// The doors.
const (
	HTTP       Door = "http"       // POST /api/v1/allocations
	Import     Door = "import"     // slicemeter allocations import
	Kafka      Door = "kafka"      // the slicemeter.allocations.v1 topic, through the collector
	Kubernetes Door = "kubernetes" // the exporter's --kubernetes discovery, through the topic and the collector
)

// Headers an allocation event's producer sets on its Kafka message so that the collector
// records the door it came through: the exporter's Kubernetes discovery sets door kubernetes
// and principal node/<node>. A message without them is door kafka. Kafka does not vouch for
// them: who may write the topic (Kafka ACLs) is who may claim them.
const (
	HeaderDoor      = "slicemeter-door"
	HeaderPrincipal = "slicemeter-principal"
)
