// Package collector consumes slicemeter's Kafka topics and writes them into ClickHouse.
//
// Delivery is at least once: offsets are committed only after the rows of every message up to
// them are inserted, the rollups of the seconds they touched written (fastrollup.go) and refused
// messages are on the dead-letter topic. A message delivered twice yields the same rows, which
// the ReplacingMergeTree tables collapse and queries deduplicate (schemas/README.md, "ClickHouse"), and the same
// rollup rows: results are exactly once.
//
// The hot path: kafka-go fetches the partitions of the group concurrently; messages are decoded
// straight into column buffers (decode.go, no allocation per sample); a full batch is handed to
// a flusher goroutine that inserts it as one native-protocol batch per table while the next
// batch fills. At most two batches exist, so memory stays bounded while ClickHouse is down.
//
// Files: consume.go fetches and turns messages into pending rows, flush.go inserts them and
// commits, deadletter.go keeps refused messages for the dead-letter topic, overlap.go refuses
// allocation events that overlap; rows.go and rollup.go are the tables' rows.
package collector

import (
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/slicemeter/slicemeter/internal/kafkaconn"
	"github.com/slicemeter/slicemeter/internal/lograte"
	"github.com/slicemeter/slicemeter/schemas/pricebook"
)

// Defaults for the zero values of Config.
const (
	DefaultGroupID         = "slicemeter-collector"
	DefaultFlushRows       = 100_000
	DefaultFlushInterval   = time.Second
	DefaultRetryMin        = 100 * time.Millisecond
	DefaultRetryMax        = 5 * time.Second
	DefaultShutdownTimeout = 10 * time.Second

	DefaultRetentionInterval = time.Hour
)

// Config says where to read from and how to batch.
type Config struct {
	Brokers []string // Kafka bootstrap brokers
	// KafkaSecurity is how every connection to them is made (TLS, SASL); zero: plaintext.
	KafkaSecurity kafkaconn.Security
	GroupID       string // consumer group; default DefaultGroupID

	// A flush inserts the pending rows and commits their offsets when FlushRows rows are
	// pending or FlushInterval has passed since the first pending message.
	FlushRows     int           // default DefaultFlushRows
	FlushInterval time.Duration // default DefaultFlushInterval

	// TopicPartitions > 0 makes Run create missing topics (samples, allocations, dead letters)
	// with that many partitions before consuming. 0 expects them to exist.
	TopicPartitions int

	// Backoff between retries of a failed flush (ClickHouse or Kafka unavailable).
	RetryMin time.Duration // default DefaultRetryMin
	RetryMax time.Duration // default DefaultRetryMax

	// ShutdownTimeout bounds the final flush once Run's context is done.
	ShutdownTimeout time.Duration // default DefaultShutdownTimeout

	// Retention of raw samples and rollups; Run drops expired day partitions every
	// RetentionInterval. The zero value keeps everything.
	Retention         Retention
	RetentionInterval time.Duration // default DefaultRetentionInterval

	// Book, when not nil, is the price book (pricebook.Load): an allocation event at a tier
	// it does not name is refused (dead-lettered, reason invalid, field tier) instead of
	// stored, since it could not be priced. nil stores every tier (attribution reports an
	// unknown one as unpriced).
	Book *pricebook.PriceBook

	// AllowTenantMoves stores an allocation event that changes a live allocation's tenant;
	// without it such an event is dead-lettered (reason tenant_move): over HTTP only an
	// operator may move an allocation, and a Kafka message names no principal.
	AllowTenantMoves bool
}

func (c *Config) setDefaults() {
	if c.GroupID == "" {
		c.GroupID = DefaultGroupID
	}
	if c.FlushRows <= 0 {
		c.FlushRows = DefaultFlushRows
	}
	if c.FlushInterval <= 0 {
		c.FlushInterval = DefaultFlushInterval
	}
	if c.RetryMin <= 0 {
		c.RetryMin = DefaultRetryMin
	}
	if c.RetryMax < c.RetryMin {
		c.RetryMax = max(DefaultRetryMax, c.RetryMin)
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.RetentionInterval <= 0 {
		c.RetentionInterval = DefaultRetentionInterval
	}
}

// Collector moves samples and allocation events from Kafka into ClickHouse.
type Collector struct {
	cfg  Config
	conn driver.Conn
	log  *slog.Logger
	// refusals logs refused messages at most once per reason per minute, and so the failures
	// that repeat while Kafka or ClickHouse is down (fetch, flush, commit: one line a minute
	// each, with the count, instead of one per retry).
	refusals *lograte.Limiter
	metrics  *metrics

	storedSamples atomic.Uint64
	storedAllocs  atomic.Uint64
	committed     atomic.Uint64 // messages whose offsets were committed (or given up on)
	started       atomic.Bool

	// The batch being filled, by Run's goroutine only; the one being flushed belongs to the
	// flusher goroutine until it hands it back.
	*batch
	decoder sampleDecoder

	// tails is what the flusher's rollup stage wrote last per instance (fastrollup.go), only
	// ever used by that stage (and the final flush after it stopped); flushes counts its runs.
	tails       map[instanceKey]*tailState
	flushes     uint64
	rollupStats rollupStats
	rollupBufs  [2]rollupColumns // samples_1s and samples_1m rows, reused by every flush
}

// rollupStats says what the rollup stage did, for tests and the benchmark.
type rollupStats struct {
	memorySeconds, memoryMinutes, recomputedSeconds, recomputedMinutes int
	// Where its time went: reading what samples_1s holds, computing rows, inserting them,
	// recomputing in ClickHouse.
	check, compute, insert, recompute time.Duration
}

// batch is what has been fetched but not yet flushed.
type batch struct {
	samples      sampleColumns
	rawStored    bool // samples are inserted; they stay for the rollups, computed from them
	allocs       allocationColumns
	allocChecks  allocationChecks // the allocs' messages, checked for overlaps before they are inserted
	deadLetters  []kafka.Message
	lastMessage  map[topicPartition]kafka.Message // highest fetched message per partition
	pending      int                              // messages fetched since the last flush
	firstPending time.Time
	interrupted  bool // stage one of the flusher gave up (shutdown): stage two must not commit it
}

func newBatch() *batch { return &batch{lastMessage: map[topicPartition]kafka.Message{}} }

type topicPartition struct {
	topic     string
	partition int
}

// New checks cfg and registers the collector's metrics on reg (nil: not registered). It does
// not connect to anything; Run does.
func New(cfg Config, conn driver.Conn, reg prometheus.Registerer, logger *slog.Logger) (*Collector, error) {
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("collector: no Kafka brokers configured")
	}
	if conn == nil {
		return nil, errors.New("collector: no ClickHouse connection")
	}
	cfg.setDefaults()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("collector: register metrics: %w", err)
	}
	log := logger.With("component", "collector")
	return &Collector{
		cfg:      cfg,
		conn:     conn,
		log:      log,
		refusals: lograte.New(log, time.Minute),
		metrics:  m,
		batch:    newBatch(),
	}, nil
}

// Stored returns how many sample and allocation rows this collector has inserted into
// ClickHouse so far (inserted, not necessarily committed in Kafka yet).
func (c *Collector) Stored() (samples, allocations uint64) {
	return c.storedSamples.Load(), c.storedAllocs.Load()
}

// Committed returns how many fetched messages this collector has finished with: stored (or
// dead-lettered) and their offsets committed, or the commit given up on after retries.
func (c *Collector) Committed() uint64 { return c.committed.Load() }
