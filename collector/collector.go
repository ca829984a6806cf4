// Package collector consumes slicemeter's Kafka topics and writes them into ClickHouse.
//
// Delivery is at least once: offsets are committed only after the rows of every message up to
// them are inserted, the rollups of the seconds they touched recomputed (rollup.go) and refused
// messages are on the dead-letter topic. A message delivered twice yields the same rows, which
// the ReplacingMergeTree tables collapse and queries deduplicate (DESIGN.md), and the same
// rollup rows: results are exactly once.
//
// The hot path: kafka-go fetches the partitions of the group concurrently; messages are decoded
// straight into column buffers (decode.go, no allocation per sample); a full batch is handed to
// a flusher goroutine that inserts it as one native-protocol batch per table while the next
// batch fills. At most two batches exist, so memory stays bounded while ClickHouse is down.
package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"

	"github.com/slicemeter/slicemeter/internal/kafkaconn"
	"github.com/slicemeter/slicemeter/internal/lograte"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
	"github.com/slicemeter/slicemeter/schemas/tables"
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

// Headers of a dead-letter message (besides the original message's own headers).
const (
	HeaderReason          = "slicemeter-reason"        // a fixed code, e.g. "decode", "missing_ts"
	HeaderReasonDetail    = "slicemeter-reason-detail" // for people: which field, which sample
	HeaderSourceTopic     = "slicemeter-source-topic"
	HeaderSourcePartition = "slicemeter-source-partition"
	HeaderSourceOffset    = "slicemeter-source-offset"
	HeaderValueOmitted    = "slicemeter-value-omitted" // original value size, when too large to keep
)

// maxDeadLetterValue is the largest original value a dead letter carries. A larger one (plus
// our headers) could exceed the broker's message size limit (1 MiB by default), and a dead
// letter that can never be written would block the stream forever.
const maxDeadLetterValue = 900 << 10

// maxPendingDeadLetters forces a flush when many refused messages wait, so that a flood of bad
// input cannot grow memory within one flush interval.
const maxPendingDeadLetters = 1000

// commitAttempts bounds retries of an offset commit. After a rebalance a commit can keep
// failing; the rows are stored, so giving up only means those messages may come again.
const commitAttempts = 5

// Config says where to read from and how to batch.
type Config struct {
	Brokers []string // Kafka bootstrap brokers
	GroupID string   // consumer group; default DefaultGroupID

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
	// refusals logs refused messages at most once per reason per minute.
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
}

// batch is what has been fetched but not yet flushed.
type batch struct {
	samples      sampleColumns
	touched      touched // rollup rows the pending (or inserted, not yet rolled up) samples change
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

// Run consumes until ctx is done, then flushes and commits what it has (bounded by
// Config.ShutdownTimeout) and returns. It returns an error only when it cannot start or when
// the final flush failed (those messages will be delivered again to the group).
func (c *Collector) Run(ctx context.Context) error {
	if !c.started.CompareAndSwap(false, true) {
		return errors.New("collector: Run called more than once")
	}
	if c.cfg.TopicPartitions > 0 {
		err := kafkaconn.EnsureTopics(ctx, c.cfg.Brokers, c.cfg.TopicPartitions,
			pb.TopicSamples, pb.TopicAllocations, pb.TopicDeadLetter)
		if err != nil {
			return fmt.Errorf("collector: %w", err)
		}
	}
	reader := kafkaconn.NewGroupReader(c.cfg.Brokers, c.cfg.GroupID, c.log, pb.TopicSamples, pb.TopicAllocations)
	deadLetterWriter := kafkaconn.NewWriter(c.cfg.Brokers, pb.TopicDeadLetter, c.log)
	defer func() {
		if err := reader.Close(); err != nil {
			c.log.Warn("close Kafka reader", "err", err)
		}
		if err := deadLetterWriter.Close(); err != nil {
			c.log.Warn("close dead-letter writer", "err", err)
		}
	}()
	if c.cfg.Retention.enabled() {
		retentionCtx, stopRetention := context.WithCancel(ctx)
		retentionDone := make(chan struct{})
		go func() { defer close(retentionDone); c.runRetention(retentionCtx) }()
		defer func() { stopRetention(); <-retentionDone }()
	}
	c.log.Info("collector started", "brokers", c.cfg.Brokers, "group", c.cfg.GroupID,
		"flush_rows", c.cfg.FlushRows, "flush_interval", c.cfg.FlushInterval)

	// Flushing runs beside the fetching, in two stages: while the next batch fills, one batch
	// has its raw rows inserted and the one before has its rollups recomputed and its offsets
	// committed. A stage blocks while ClickHouse is down, and so does handing it a batch, so
	// memory stays bounded (at most three batches).
	f := newFlusher(c, reader, deadLetterWriter)
	go f.run(ctx)
	var free []*batch
	inFlight := 0
	retry := c.cfg.RetryMin
	for ctx.Err() == nil {
		if c.flushDue(time.Now()) {
			if inFlight == 2 {
				select {
				case b := <-f.done:
					free, inFlight = append(free, b), inFlight-1
				case <-ctx.Done():
				}
			}
			if ctx.Err() == nil {
				select {
				case f.todo <- c.batch:
					inFlight++
					if n := len(free); n > 0 {
						c.batch, free = free[n-1], free[:n-1]
					} else {
						c.batch = newBatch()
					}
				case <-ctx.Done():
				}
			}
			if ctx.Err() != nil {
				break
			}
		}
		fetchCtx, cancel := ctx, context.CancelFunc(func() {})
		if c.pending > 0 {
			fetchCtx, cancel = context.WithDeadline(ctx, c.firstPending.Add(c.cfg.FlushInterval))
		}
		// A cancelled FetchMessage loses nothing: kafka-go keeps the message for the next call.
		msg, err := reader.FetchMessage(fetchCtx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			if errors.Is(err, context.DeadlineExceeded) {
				continue // time to flush
			}
			c.log.Warn("fetch from Kafka", "err", err, "retry_in", retry)
			sleep(ctx, retry)
			retry = min(2*retry, c.cfg.RetryMax)
			continue
		}
		retry = c.cfg.RetryMin
		c.process(msg, time.Now())
	}

	// The stages stop retrying once ctx is done; what they did not finish is flushed again
	// here, oldest first and before the current batch, so offsets are still committed in order.
	close(f.todo)
	var unflushed []*batch
	for range inFlight {
		if b := <-f.done; b.pending > 0 {
			unflushed = append(unflushed, b)
		}
	}
	if c.pending > 0 {
		unflushed = append(unflushed, c.batch)
	}
	if len(unflushed) == 0 {
		c.log.Info("collector stopped")
		return nil
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.ShutdownTimeout)
	defer cancel()
	for _, b := range unflushed {
		if err := c.flush(shutdownCtx, reader, deadLetterWriter, b); err != nil {
			return fmt.Errorf("collector: final flush of %d messages (not committed, will be delivered again): %w", b.pending, err)
		}
	}
	c.log.Info("collector stopped")
	return nil
}

// flusher stores and commits the batches it is given, in order: stage one writes dead letters
// and inserts raw rows, stage two recomputes rollups and commits. Each batch comes back on done,
// emptied, or still pending once ctx ended first; after a batch that was not committed no later
// one is, since a commit covers every earlier offset of its partitions.
type flusher struct {
	c                *Collector
	reader           *kafka.Reader
	deadLetterWriter *kafka.Writer
	todo             chan *batch
	rollup           chan *batch
	done             chan *batch
}

func newFlusher(c *Collector, reader *kafka.Reader, deadLetterWriter *kafka.Writer) *flusher {
	return &flusher{c: c, reader: reader, deadLetterWriter: deadLetterWriter,
		todo: make(chan *batch), rollup: make(chan *batch), done: make(chan *batch, 2)}
}

func (f *flusher) run(ctx context.Context) {
	stageTwo := make(chan struct{})
	go func() {
		defer close(stageTwo)
		interrupted := false
		for b := range f.rollup {
			if !interrupted && !b.interrupted {
				if err := f.c.storeRetrying(ctx, f.deadLetterWriter, b, true); err == nil {
					f.c.commit(ctx, f.reader, b)
				} else {
					interrupted = true
				}
			} else {
				interrupted = true
			}
			b.interrupted = false
			if b.pending > 0 {
				f.c.log.Info("flush interrupted by shutdown", "pending_messages", b.pending)
			}
			f.done <- b
		}
	}()
	for b := range f.todo {
		b.interrupted = f.c.storeRetrying(ctx, f.deadLetterWriter, b, false) != nil
		f.rollup <- b
	}
	close(f.rollup)
	<-stageTwo
}

func (c *Collector) flushDue(now time.Time) bool {
	if c.pending == 0 {
		return false
	}
	return c.samples.len()+c.allocs.len() >= c.cfg.FlushRows ||
		len(c.deadLetters) >= maxPendingDeadLetters ||
		!now.Before(c.firstPending.Add(c.cfg.FlushInterval))
}

// process turns one fetched message into pending rows or a pending dead letter.
func (c *Collector) process(msg kafka.Message, now time.Time) {
	c.metrics.consumed.WithLabelValues(msg.Topic).Inc()
	if c.pending == 0 {
		c.firstPending = now
	}
	c.pending++
	c.metrics.pendingMessages.Inc()
	tp := topicPartition{msg.Topic, msg.Partition}
	if last, ok := c.lastMessage[tp]; !ok || msg.Offset > last.Offset {
		c.lastMessage[tp] = msg
	}
	switch msg.Topic {
	case pb.TopicSamples:
		c.processSamples(msg)
	case pb.TopicAllocations:
		c.processAllocation(msg, now)
	default:
		c.refuse(msg, &refusal{reasonUnknownTopic, "collector does not read topic " + msg.Topic})
	}
}

func (c *Collector) processSamples(msg kafka.Message) {
	d := &c.decoder
	if err := d.decode(msg.Value); err != nil {
		c.refuse(msg, &refusal{reasonDecode, "not a SampleBatch: " + err.Error()})
		return
	}
	if d.node == "" {
		c.metrics.samplesDropped.WithLabelValues(reasonMissingNode).Add(float64(len(d.samples)))
		c.refuse(msg, &refusal{reasonMissingNode, fmt.Sprintf("batch node is empty (%d samples dropped)", len(d.samples))})
		return
	}
	var (
		first      *refusal
		firstIndex int
		dropped    int
	)
	c.touched.addNode(d.node)
	for i := range d.samples {
		s := &d.samples[i]
		if r := checkWireSample(s); r != nil {
			c.metrics.samplesDropped.WithLabelValues(r.reason).Inc()
			if first == nil {
				first, firstIndex = r, i
			}
			dropped++
			continue
		}
		c.samples.addWire(d.node, s, d)
		c.touched.addSecond(uint32(s.tsNs / 1e9))
	}
	if first != nil {
		// The valid samples are stored; the message is dead-lettered once, with the reason of
		// its first invalid sample.
		c.refuse(msg, &refusal{first.reason, fmt.Sprintf("node %s: %d of %d samples dropped; first: sample %d: %s",
			d.node, dropped, len(d.samples), firstIndex, first.detail)})
	}
}

func (c *Collector) processAllocation(msg kafka.Message, now time.Time) {
	var event pb.AllocationEvent
	if err := proto.Unmarshal(msg.Value, &event); err != nil {
		c.refuse(msg, &refusal{reasonDecode, "not an AllocationEvent: " + err.Error()})
		return
	}
	if r := checkAllocation(&event); r != nil {
		c.refuse(msg, &refusal{r.reason, fmt.Sprintf("allocation %q: %s", event.GetAllocationId(), r.detail)})
		return
	}
	c.allocs.add(&event, now)
	c.allocChecks.add(msg, &event)
}

// refuse queues msg for the dead-letter topic; it is written by the next flush.
func (c *Collector) refuse(msg kafka.Message, r *refusal) { c.refuseInto(c.batch, msg, r) }

// refuseInto queues msg for the dead-letter topic with b's dead letters.
func (c *Collector) refuseInto(b *batch, msg kafka.Message, r *refusal) {
	// Once per reason per minute (with how many were not logged): a stream of bad messages
	// must not flood the log; slicemeter_collector_deadlettered_total counts every one.
	c.refusals.Log(context.Background(), time.Now(), slog.LevelWarn, r.reason, "message refused, sending it to the dead-letter topic",
		"topic", msg.Topic, "partition", msg.Partition, "offset", msg.Offset, "detail", r.detail)
	headers := append([]kafka.Header(nil), msg.Headers...)
	headers = append(headers,
		kafka.Header{Key: HeaderReason, Value: []byte(r.reason)},
		kafka.Header{Key: HeaderReasonDetail, Value: []byte(r.detail)},
		kafka.Header{Key: HeaderSourceTopic, Value: []byte(msg.Topic)},
		kafka.Header{Key: HeaderSourcePartition, Value: []byte(strconv.Itoa(msg.Partition))},
		kafka.Header{Key: HeaderSourceOffset, Value: []byte(strconv.FormatInt(msg.Offset, 10))},
	)
	value := msg.Value
	if len(msg.Key)+len(value) > maxDeadLetterValue {
		value = nil
		headers = append(headers, kafka.Header{Key: HeaderValueOmitted, Value: []byte(strconv.Itoa(len(msg.Value)))})
	}
	b.deadLetters = append(b.deadLetters, kafka.Message{Key: msg.Key, Value: value, Headers: headers})
}

// flush stores everything pending and then commits the offsets, retrying with backoff until
// it succeeds or ctx is done. Steps that succeeded are not repeated on retry.
func (c *Collector) flush(ctx context.Context, reader *kafka.Reader, deadLetterWriter *kafka.Writer, b *batch) error {
	c.refusals.Flush(ctx, time.Now())
	if err := c.storeRetrying(ctx, deadLetterWriter, b, true); err != nil {
		return err
	}
	c.commit(ctx, reader, b)
	return nil
}

// storeRetrying runs store until it succeeds or ctx is done.
func (c *Collector) storeRetrying(ctx context.Context, deadLetterWriter *kafka.Writer, b *batch, rollups bool) error {
	retry := c.cfg.RetryMin
	for {
		err := c.store(ctx, deadLetterWriter, b, rollups)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		c.log.Warn("flush failed; offsets not committed, retrying", "err", err, "retry_in", retry,
			"pending_messages", b.pending, "pending_rows", b.samples.len()+b.allocs.len())
		sleep(ctx, retry)
		retry = min(2*retry, c.cfg.RetryMax)
	}
}

// store writes the pending dead letters and inserts the pending rows, each step once, and with
// rollups also recomputes the rollup rows the batch touched.
func (c *Collector) store(ctx context.Context, deadLetterWriter *kafka.Writer, b *batch, rollups bool) error {
	// Before the dead letters: the overlapping allocation events join them.
	if err := c.refuseOverlaps(ctx, b); err != nil {
		return err
	}
	if len(b.deadLetters) > 0 {
		if err := deadLetterWriter.WriteMessages(ctx, b.deadLetters...); err != nil {
			c.metrics.deadLetterErrs.Inc()
			return fmt.Errorf("write %d messages to %s: %w", len(b.deadLetters), pb.TopicDeadLetter, err)
		}
		for _, dl := range b.deadLetters {
			c.metrics.deadLettered.WithLabelValues(header(dl, HeaderSourceTopic), header(dl, HeaderReason)).Inc()
		}
		clear(b.deadLetters)
		b.deadLetters = b.deadLetters[:0]
	}
	if n := b.samples.len(); n > 0 {
		if err := c.insert(ctx, tables.Samples, tables.SampleColumns, b.samples.columns(), n); err != nil {
			return err
		}
		c.storedSamples.Add(uint64(n))
		c.metrics.samplesStored.Add(float64(n))
		c.observeFreshness(b, time.Now())
		b.samples.reset()
	}
	// After the raw rows, before the commit: a crash in between replays the batch, which
	// recomputes the same rollup rows.
	if rollups && !b.touched.empty() {
		start := time.Now()
		if err := recomputeRollups(ctx, c.conn, &b.touched); err != nil {
			c.metrics.insertErrors.WithLabelValues(tables.Samples1s).Inc()
			return err
		}
		c.metrics.insertDuration.WithLabelValues(tables.Samples1s).Observe(time.Since(start).Seconds())
		b.touched.reset()
	}
	if n := b.allocs.len(); n > 0 {
		if err := c.insert(ctx, tables.Allocations, tables.AllocationColumns, b.allocs.columns(), n); err != nil {
			return err
		}
		c.storedAllocs.Add(uint64(n))
		c.metrics.allocsStored.Add(float64(n))
		b.allocs.reset()
		b.allocChecks.reset()
	}
	return nil
}

func (c *Collector) insert(ctx context.Context, table string, names []string, columns []any, rows int) error {
	start := time.Now()
	if err := insertColumns(ctx, c.conn, table, names, columns); err != nil {
		c.metrics.insertErrors.WithLabelValues(table).Inc()
		return fmt.Errorf("insert %d rows: %w", rows, err)
	}
	elapsed := time.Since(start)
	c.metrics.insertDuration.WithLabelValues(table).Observe(elapsed.Seconds())
	c.metrics.batchRows.WithLabelValues(table).Observe(float64(rows))
	c.log.Debug("inserted", "table", table, "rows", rows, "took", elapsed)
	return nil
}

// commit commits the highest fetched offset of every partition and forgets the flushed
// messages. A commit that keeps failing is logged and counted, not retried forever: the rows
// are stored, so the worst case is that those messages are delivered (and stored) again.
func (c *Collector) commit(ctx context.Context, reader *kafka.Reader, b *batch) {
	msgs := make([]kafka.Message, 0, len(b.lastMessage))
	for _, m := range b.lastMessage {
		msgs = append(msgs, kafka.Message{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset})
		// HighWaterMark is the partition's next offset when the message was fetched.
		c.metrics.consumerLag.WithLabelValues(m.Topic, strconv.Itoa(m.Partition)).Set(float64(max(0, m.HighWaterMark-m.Offset-1)))
	}
	// Once the rows are stored the commit is worth finishing even if ctx was just cancelled,
	// so each attempt gets its own bounded context.
	detached := context.WithoutCancel(ctx)
	retry := c.cfg.RetryMin
	for attempt := 1; ; attempt++ {
		attemptCtx, cancel := context.WithTimeout(detached, 5*time.Second)
		err := reader.CommitMessages(attemptCtx, msgs...)
		cancel()
		if err == nil {
			break
		}
		c.metrics.commitErrors.Inc()
		if attempt == commitAttempts || ctx.Err() != nil {
			c.log.Error("commit Kafka offsets failed; those messages may be delivered again",
				"err", err, "partitions", len(msgs), "messages", b.pending)
			break
		}
		c.log.Warn("commit Kafka offsets", "err", err, "attempt", attempt, "retry_in", retry)
		sleep(ctx, retry)
		retry = min(2*retry, c.cfg.RetryMax)
	}
	clear(b.lastMessage)
	c.committed.Add(uint64(b.pending))
	c.metrics.pendingMessages.Sub(float64(b.pending))
	b.pending = 0
}

// observeFreshness records, for every pending sample, how long after its timestamp it was
// stored. Clock skew between node and collector can make it negative; that counts as 0.
func (c *Collector) observeFreshness(b *batch, now time.Time) {
	nowNs := now.UnixNano()
	for _, ts := range b.samples.tsNs {
		c.metrics.freshness.Observe(max(0, float64(nowNs-int64(ts))) / 1e9)
	}
}

// header returns the last value of key: ours come after any the original message carried.
func header(m kafka.Message, key string) string {
	for i := len(m.Headers) - 1; i >= 0; i-- {
		if m.Headers[i].Key == key {
			return string(m.Headers[i].Value)
		}
	}
	return ""
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
