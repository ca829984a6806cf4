package collector

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slicemeter/slicemeter/schemas/audit"
	"github.com/slicemeter/slicemeter/schemas/tables"
)

// commitAttempts bounds retries of an offset commit. After a rebalance a commit can keep
// failing; the rows are stored, so giving up only means those messages may come again.
const commitAttempts = 5

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
		c.refusals.Log(ctx, time.Now(), slog.LevelWarn, "flush", "flush failed; offsets not committed, retrying", "err", err, "retry_in", retry,
			"pending_messages", b.pending, "pending_rows", b.samples.len()+b.allocs.len())
		sleep(ctx, retry)
		retry = min(2*retry, c.cfg.RetryMax)
	}
}

// store writes the pending dead letters and inserts the pending rows, each step once, and with
// rollups also writes the rollup rows the batch touched.
func (c *Collector) store(ctx context.Context, deadLetterWriter *kafka.Writer, b *batch, rollups bool) error {
	// Before the dead letters: the overlapping allocation events join them.
	if err := c.refuseOverlaps(ctx, b); err != nil {
		return err
	}
	if err := c.writeDeadLetters(ctx, deadLetterWriter, b); err != nil {
		return err
	}
	if n := b.samples.len(); n > 0 && !b.rawStored {
		if err := c.insert(ctx, tables.Samples, tables.SampleColumns, b.samples.columns(), n); err != nil {
			return err
		}
		c.storedSamples.Add(uint64(n))
		c.metrics.samplesStored.Add(float64(n))
		c.metrics.energyEstimated.Add(float64(b.samples.estimatedEnergy()))
		c.observeFreshness(b, time.Now())
		b.rawStored = true
	}
	// After the raw rows, before the commit: a crash in between replays the batch, whose
	// rollup rows are then recomputed where they were written (fastrollup.go).
	if rollups && b.samples.len() > 0 {
		start := time.Now()
		if err := c.rollupInMemory(ctx, &b.samples); err != nil {
			c.metrics.insertErrors.WithLabelValues(tables.Samples1s).Inc()
			return err
		}
		c.metrics.insertDuration.WithLabelValues(tables.Samples1s).Observe(time.Since(start).Seconds())
		b.samples.reset()
		b.rawStored = false
	}
	if n := b.allocs.len(); n > 0 {
		// The audit entries first: allocations stored without them would be writes nobody
		// can account for. A failure is counted and retried like any insert's.
		if !b.allocChecks.audited {
			if err := audit.Insert(ctx, c.conn, b.allocChecks.audit); err != nil {
				c.metrics.insertErrors.WithLabelValues(tables.AllocationAudit).Inc()
				return err
			}
			b.allocChecks.audited = true
		}
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
		c.refusals.Log(ctx, time.Now(), slog.LevelWarn, "commit", "commit Kafka offsets failed; retrying", "err", err, "attempt", attempt, "retry_in", retry)
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
