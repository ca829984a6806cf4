package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/segmentio/kafka-go"
	"google.golang.org/protobuf/proto"

	"github.com/slicemeter/slicemeter/internal/kafkaconn"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// kafka is the cluster the collector reads from and writes dead letters to.
func (c *Collector) kafka() kafkaconn.Cluster {
	return kafkaconn.Cluster{Brokers: c.cfg.Brokers, Security: c.cfg.KafkaSecurity}
}

// Run consumes until ctx is done, then flushes and commits what it has (bounded by
// Config.ShutdownTimeout) and returns. It returns an error only when it cannot start or when
// the final flush failed (those messages will be delivered again to the group).
func (c *Collector) Run(ctx context.Context) error {
	if !c.started.CompareAndSwap(false, true) {
		return errors.New("collector: Run called more than once")
	}
	if c.cfg.TopicPartitions > 0 {
		err := c.kafka().EnsureTopics(ctx, c.cfg.TopicPartitions, pb.TopicSamples, pb.TopicAllocations, pb.TopicDeadLetter)
		if err != nil {
			return fmt.Errorf("collector: %w", err)
		}
	}
	reader := c.kafka().NewGroupReader(c.cfg.GroupID, c.log, pb.TopicSamples, pb.TopicAllocations)
	deadLetterWriter := c.kafka().NewWriter(pb.TopicDeadLetter, c.log)
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
	c.log.Info("collector started", "brokers", c.cfg.Brokers, "kafka_security", c.cfg.KafkaSecurity.String(), "group", c.cfg.GroupID,
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
			c.refusals.Log(ctx, time.Now(), slog.LevelWarn, "fetch", "fetch from Kafka failed; retrying", "err", err, "retry_in", retry)
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
		c.processSamples(msg, now)
	case pb.TopicAllocations:
		c.processAllocation(msg, now)
	default:
		c.refuse(msg, &refusal{reason: reasonUnknownTopic, detail: "collector does not read topic " + msg.Topic})
	}
}

func (c *Collector) processSamples(msg kafka.Message, now time.Time) {
	d := &c.decoder
	if err := d.decode(msg.Value); err != nil {
		c.refuse(msg, &refusal{reason: reasonDecode, detail: "not a SampleBatch: " + err.Error()})
		return
	}
	if d.node == "" {
		c.metrics.samplesDropped.WithLabelValues(reasonMissingNode).Add(float64(len(d.samples)))
		c.refuse(msg, &refusal{reason: reasonMissingNode, field: "node", detail: fmt.Sprintf("batch node is empty (%d samples dropped)", len(d.samples))})
		return
	}
	var (
		first      *refusal
		firstIndex int
		dropped    int
	)
	for i := range d.samples {
		s := &d.samples[i]
		if r := checkWireSample(s, now); r != nil {
			c.metrics.samplesDropped.WithLabelValues(r.reason).Inc()
			if first == nil {
				first, firstIndex = r, i
			}
			dropped++
			continue
		}
		c.samples.addWire(d.node, s, d)
	}
	if first != nil {
		// The valid samples are stored; the message is dead-lettered once, with the reason of
		// its first invalid sample.
		c.refuse(msg, &refusal{reason: first.reason, field: first.field, detail: fmt.Sprintf("node %s: %d of %d samples dropped; first: sample %d: %s",
			d.node, dropped, len(d.samples), firstIndex, first.detail)})
	}
}

func (c *Collector) processAllocation(msg kafka.Message, now time.Time) {
	var event pb.AllocationEvent
	if err := proto.Unmarshal(msg.Value, &event); err != nil {
		c.refuse(msg, &refusal{reason: reasonDecode, detail: "not an AllocationEvent: " + err.Error()})
		return
	}
	var tiers map[string]float64 // nil: every tier is stored
	if c.cfg.Book != nil {
		tiers = c.cfg.Book.Tiers
	}
	if r := checkAllocation(&event, tiers); r != nil {
		c.refuse(msg, &refusal{reason: r.reason, field: r.field, detail: fmt.Sprintf("allocation %q: %s", event.GetAllocationId(), r.detail)})
		return
	}
	c.allocs.add(&event, now)
	c.allocChecks.add(msg, &event)
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
