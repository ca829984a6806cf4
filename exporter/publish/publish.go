// Package publish sends every sample to Kafka: one SampleBatch per node per flush on
// slicemeter.samples.v1, keyed by node. With a spool, batches go through a bounded disk queue
// that a sender drains in order, so a Kafka outage loses nothing until the spool is full.
package publish

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/protobuf/proto"

	"github.com/slicemeter/slicemeter/exporter"
	"github.com/slicemeter/slicemeter/exporter/spool"
	"github.com/slicemeter/slicemeter/internal/lograte"
	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// LogEvery is how often one kind of repeated problem (drops of one reason, failed writes,
// Kafka unreachable) is logged at most; the next line says how many were not logged.
const LogEvery = time.Minute

// Reasons samples are dropped (the reason label of slicemeter_exporter_samples_dropped_total),
// beside the spool's own (spool.ReasonFull, spool.ReasonCorrupt).
const (
	ReasonSpoolError       = "spool_error"       // a write to the spool failed
	ReasonKafkaUnavailable = "kafka_unavailable" // no spool, and Kafka refused a flush after the retries
	ReasonTooLarge         = "message_too_large" // one sample alone is larger than Kafka accepts
)

// DefaultMaxMessageBytes is the message size limit until the topic's max.message.bytes is
// known: Kafka's default (1 MB) less room for the record batch's own fields.
const DefaultMaxMessageBytes = 1_000_000

// messageOverhead is what Kafka adds to a message's key and value in its record batch.
const messageOverhead = 512

// DropReasons are every value of the reason label.
func DropReasons() []string {
	return []string{ReasonSpoolError, ReasonKafkaUnavailable, ReasonTooLarge, spool.ReasonFull, spool.ReasonCorrupt, spool.ReasonNoSpace, spool.ReasonMemoryFull}
}

// Queue is where flushed batches wait for the sender: the disk spool (spool.Spool) or, without
// a spool directory, a bounded memory queue (spool.Memory).
type Queue interface {
	Append(rec []byte, weight uint32) error
	Peek() (rec []byte, weight uint32, ok bool, err error)
	Pop() error
	Len() int
	Bytes() int64
	// MaxRecord is the largest record Append takes: messages are split to fit it.
	MaxRecord() int64
	Close() error
}

// MessageWriter is the part of kafka.Writer the publisher uses.
type MessageWriter interface {
	WriteMessages(ctx context.Context, msgs ...kafka.Message) error
}

// Publisher buffers a flush interval of samples and writes them as one batch per node.
type Publisher struct {
	w          MessageWriter
	topic      string
	exporterID string
	logger     *slog.Logger
	// limit logs a repeated problem (a drop, a failed write) once per LogEvery with how many
	// there were: a full spool drops one batch per flush, thousands in seconds.
	limit   *lograte.Limiter
	retries int
	backoff time.Duration

	mu      sync.Mutex
	pending map[string][]*pb.Sample
	order   []string // nodes in first-seen order, so batches keep a stable order
	seq     atomic.Uint64
	// dropTotal is the samples the spool dropped so far, for the log line.
	dropTotal atomic.Uint64
	// maxMessage bounds an encoded message (key and value): batches are split to fit the
	// topic's max.message.bytes.
	maxMessage atomic.Int64

	published prometheus.Counter
	batches   prometheus.Counter
	errors    prometheus.Counter
	dropped   *prometheus.CounterVec
	bytes     prometheus.Counter

	spool    Queue // nil: none, Flush writes to Kafka itself
	spoolDir string
	prepare  func(context.Context) error
	// state is what /readyz says is missing; empty once Kafka took a write.
	stateMu  sync.Mutex
	prepared bool
	missing  string
	wake     chan struct{}
	tracer   trace.Tracer
	// maxBackoff caps the sender's wait between attempts while Kafka is unreachable.
	maxBackoff time.Duration
}

// Options are the publisher's optional parts; the zero value is a publisher without a spool or
// memory queue, preparation or tracer, splitting at DefaultMaxMessageBytes.
type Options struct {
	// SpoolDir is the directory of a disk spool: batches are appended to it and a sender (Run)
	// drains it in order. Empty: no spool; a flush that still fails after the retries is
	// dropped and counted.
	SpoolDir string
	// SpoolMaxBytes is the spool's size limit; when it is full the oldest batches are dropped
	// and counted.
	SpoolMaxBytes int64
	// SpoolDisk is where the spool writes its segments (nil: the file system; tests fill it).
	SpoolDisk spool.Disk
	// MemoryQueueBytes, without SpoolDir, is the size limit of a memory queue that takes the
	// spool's place (its drops are counted as memory_queue_full; what it holds at exit is
	// lost). 0: no queue.
	MemoryQueueBytes int64
	// Prepare, if set, is run by the sender until it succeeds before anything is sent (making
	// sure the topic exists): the exporter starts, samples and queues without Kafka.
	Prepare func(context.Context) error
	// MaxMessageBytes is the largest message the topic accepts (its max.message.bytes): bigger
	// batches are split. 0: DefaultMaxMessageBytes until SetMaxMessageBytes.
	MaxMessageBytes int64
	// Tracer: spans around flushes, Kafka writes and spool drains (nil: none).
	Tracer trace.TracerProvider
}

var _ exporter.Sink = (*Publisher)(nil)

// New returns a publisher writing to topic through w. Without a spool or memory queue in opts,
// messages of a flush that still fail after the retries are dropped and counted in
// slicemeter_exporter_samples_dropped_total; with a spool (opened in opts.SpoolDir; its error
// is spool.Open's), Close closes it.
func New(w MessageWriter, topic string, reg prometheus.Registerer, logger *slog.Logger, opts Options) (*Publisher, error) {
	p := newPublisher(w, topic, logger, opts.Tracer)
	switch {
	case opts.SpoolDir != "":
		sp, err := spool.Open(opts.SpoolDir, opts.SpoolMaxBytes, spool.Options{OnDrop: p.spoolDrop, Disk: opts.SpoolDisk})
		if err != nil {
			return nil, err
		}
		p.spool, p.spoolDir = sp, opts.SpoolDir
	case opts.MemoryQueueBytes > 0:
		q, err := spool.NewMemory(opts.MemoryQueueBytes, p.spoolDrop)
		if err != nil {
			return nil, err
		}
		p.spool = q
	}
	if opts.MaxMessageBytes > 0 {
		p.SetMaxMessageBytes(opts.MaxMessageBytes)
	}
	if p.prepare = opts.Prepare; p.prepare != nil {
		p.missing = "kafka: not reached yet"
	}
	p.register(reg)
	return p, nil
}

func newPublisher(w MessageWriter, topic string, logger *slog.Logger, tp trace.TracerProvider) *Publisher {
	host, _ := os.Hostname()
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	p := &Publisher{
		w: w, topic: topic, logger: logger, limit: lograte.New(logger, LogEvery), retries: 5, backoff: 200 * time.Millisecond,
		exporterID: fmt.Sprintf("%s/%d/%d", host, os.Getpid(), time.Now().UnixNano()),
		pending:    map[string][]*pb.Sample{},
		published: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slicemeter_exporter_samples_published_total", Help: "Samples written to Kafka.",
		}),
		batches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slicemeter_exporter_batches_published_total", Help: "SampleBatch messages written to Kafka.",
		}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slicemeter_exporter_publish_errors_total", Help: "Failed Kafka writes (each retry counts).",
		}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "slicemeter_exporter_samples_dropped_total", Help: "Samples that could not be delivered, by reason.",
		}, []string{"reason"}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "slicemeter_exporter_published_bytes_total", Help: "Encoded SampleBatch bytes written to Kafka (before compression).",
		}),
		wake: make(chan struct{}, 1), maxBackoff: 5 * time.Second,
		tracer: tp.Tracer("github.com/slicemeter/slicemeter/exporter/publish"),
	}
	p.maxMessage.Store(DefaultMaxMessageBytes)
	// Every reason from the start at 0: the drop alert's increase() sees the first drop.
	for _, r := range DropReasons() {
		p.dropped.WithLabelValues(r)
	}
	return p
}

// register registers the publisher's metrics, and the spool's if it has one (nil reg: none).
func (p *Publisher) register(reg prometheus.Registerer) {
	if reg == nil {
		return
	}
	reg.MustRegister(p.published, p.batches, p.errors, p.dropped, p.bytes,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "slicemeter_exporter_kafka_up", Help: "1 once Kafka has the samples topic and took the latest write; 0 while batches wait for it.",
		}, func() float64 {
			if p.Missing() == "" {
				return 1
			}
			return 0
		}))
	name, where := "spool", "on disk"
	if _, ok := p.spool.(*spool.Memory); ok {
		name, where = "memory_queue", "in memory (no --spool.dir)"
	}
	if sp := p.spool; sp != nil {
		reg.MustRegister(
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "slicemeter_exporter_" + name + "_bytes", Help: "Size of the Kafka queue " + where + ".",
			}, func() float64 { return float64(sp.Bytes()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "slicemeter_exporter_" + name + "_batches", Help: "SampleBatch messages in the Kafka queue " + where + ", not yet written to Kafka.",
			}, func() float64 { return float64(sp.Len()) }),
		)
	}
}

// Missing says what the publisher lacks, for /readyz: empty while Kafka takes its writes.
func (p *Publisher) Missing() string {
	p.stateMu.Lock()
	defer p.stateMu.Unlock()
	if p.missing == "" {
		return ""
	}
	if p.spool != nil {
		return fmt.Sprintf("%s (%d batches queued)", p.missing, p.spool.Len())
	}
	return p.missing
}

// setMissing records the outcome of a Kafka write or preparation (nil: Kafka is there).
func (p *Publisher) setMissing(err error) {
	p.stateMu.Lock()
	defer p.stateMu.Unlock()
	if err == nil {
		p.missing = ""
		return
	}
	p.missing = "kafka: " + err.Error()
}

// ready runs Prepare until it has succeeded once.
func (p *Publisher) ready(ctx context.Context) error {
	p.stateMu.Lock()
	done := p.prepared || p.prepare == nil
	p.stateMu.Unlock()
	if done {
		return nil
	}
	if err := p.prepare(ctx); err != nil {
		p.setMissing(err)
		return err
	}
	p.setMissing(nil)
	p.stateMu.Lock()
	p.prepared = true
	p.stateMu.Unlock()
	p.logger.Info("Kafka reached; sending the queued batches", "topic", p.topic)
	return nil
}

// spoolDrop is the spool's drop callback: it counts the dropped samples.
func (p *Publisher) spoolDrop(weight uint32, reason string) {
	p.dropped.WithLabelValues(reason).Add(float64(weight))
	p.dropTotal.Add(uint64(weight))
	p.limit.Log(context.Background(), time.Now(), slog.LevelWarn, "dropped_"+reason, "samples dropped from the Kafka spool (slicemeter_exporter_samples_dropped_total)",
		"samples", weight, "samples_dropped_so_far", p.dropTotal.Load())
}

// Close closes the spool, if there is one; what it still holds stays for the next start. The
// repeated problems not logged yet (drops since the last line) are logged first, with their
// counts, so that the log of a run says how much it dropped.
func (p *Publisher) Close() error {
	p.limit.Flush(context.Background(), time.Now().Add(LogEvery))
	if p.spool == nil {
		return nil
	}
	return p.spool.Close()
}

// Write buffers a tick's samples until the next Flush.
func (p *Publisher) Write(_ context.Context, _ time.Time, samples []exporter.NodeSamples) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ns := range samples {
		if _, ok := p.pending[ns.Node]; !ok {
			p.order = append(p.order, ns.Node)
		}
		p.pending[ns.Node] = append(p.pending[ns.Node], ns.Samples...)
	}
	return nil
}

// Flush writes the buffered samples, one message per node: to the spool if there is one (the
// sender delivers them), else to Kafka, retrying with backoff.
func (p *Publisher) Flush(ctx context.Context) error {
	ctx, span := p.tracer.Start(ctx, "publish.flush")
	defer span.End()
	msgs, counts, count, err := p.take()
	if err != nil || len(msgs) == 0 {
		return err
	}
	span.SetAttributes(attribute.Int("samples", count), attribute.Int("batches", len(msgs)))
	if p.spool != nil {
		// Every message is tried (a failed write may have made room for the next), and every
		// sample not kept is counted: spooled + dropped == flushed.
		var errs []error
		lost := 0
		for i, m := range msgs {
			n := counts[i]
			if err := p.spool.Append(encodeRecord(m), uint32(n)); err != nil {
				p.dropped.WithLabelValues(ReasonSpoolError).Add(float64(n))
				lost += n
				errs = append(errs, err)
			}
		}
		if len(errs) < len(msgs) {
			select {
			case p.wake <- struct{}{}:
			default:
			}
		}
		if len(errs) > 0 {
			err := errors.Join(errs...)
			span.RecordError(err)
			span.SetStatus(codes.Error, "spooling")
			return fmt.Errorf("spooling: %d of %d samples dropped (%d of %d batches): %w", lost, count, len(errs), len(msgs), err)
		}
		return nil
	}
	for attempt := 0; attempt <= p.retries; attempt++ {
		if err = p.ready(ctx); err == nil {
			err = p.write(ctx, msgs, count)
		}
		if tooLarge(err) { // not an outage: deliver one by one, splitting what does not fit
			for i, m := range msgs {
				if err = p.deliver(ctx, m, counts[i]); err != nil {
					break
				}
			}
		}
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			break
		}
		p.limit.Log(ctx, time.Now(), slog.LevelWarn, "write_failed", "writing samples to Kafka failed; retrying", "attempt", attempt+1, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(p.backoff << attempt):
		}
	}
	p.dropped.WithLabelValues(ReasonKafkaUnavailable).Add(float64(count))
	span.SetStatus(codes.Error, "dropped")
	return fmt.Errorf("writing %d samples to Kafka topic %s (dropped): %w", count, p.topic, err)
}

// SetMaxMessageBytes sets the largest message the topic accepts (its max.message.bytes, read
// once Kafka is reached): later batches are split to fit.
func (p *Publisher) SetMaxMessageBytes(n int64) {
	p.maxMessage.Store(max(n-messageOverhead, 1024))
}

// take encodes the buffered samples as messages of one node each, split to fit the message
// size limit, and empties the buffer; counts are the samples of each message.
func (p *Publisher) take() (msgs []kafka.Message, counts []int, count int, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	msgs = make([]kafka.Message, 0, len(p.order))
	for _, node := range p.order {
		samples := p.pending[node]
		if len(samples) == 0 {
			continue
		}
		if msgs, counts, err = p.encode(msgs, counts, node, samples); err != nil {
			return nil, nil, 0, err
		}
		count += len(samples)
		p.pending[node] = samples[:0:0]
	}
	return msgs, counts, count, nil
}

// encode appends samples of node as one SampleBatch message, or as several (halving) where
// one would exceed the message size limit. A single sample is never split.
func (p *Publisher) encode(msgs []kafka.Message, counts []int, node string, samples []*pb.Sample) ([]kafka.Message, []int, error) {
	// Marshalled, then measured: sizing the batch first (proto.Size) walked every sample once
	// more on every flush, for a split that almost never happens. A batch that has to be split
	// leaves its seq unused (seq only increases; nothing reads it as gapless).
	b := &pb.SampleBatch{Node: node, ExporterId: p.exporterID, Samples: samples, Seq: p.seq.Add(1)}
	value, err := proto.Marshal(b)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the batch of node %s: %w", node, err)
	}
	if len(samples) > 1 && int64(len(value)+len(node)) > p.messageLimit() {
		half := len(samples) / 2
		msgs, counts, err := p.encode(msgs, counts, node, samples[:half])
		if err != nil {
			return nil, nil, err
		}
		return p.encode(msgs, counts, node, samples[half:])
	}
	return append(msgs, kafka.Message{Topic: p.topic, Key: []byte(node), Value: value}), append(counts, len(samples)), nil
}

// messageLimit is the largest message to encode: what the topic accepts and, with a queue,
// what one of its records holds (a small --spool.max-bytes makes segments smaller than a
// Kafka batch: those are split too, not dropped).
func (p *Publisher) messageLimit() int64 {
	limit := p.maxMessage.Load()
	if p.spool != nil {
		limit = min(limit, p.spool.MaxRecord()-binary.MaxVarintLen32) // encodeRecord's key length
	}
	return limit
}

// tooLarge says whether Kafka refused a write as too large (the broker's MESSAGE_TOO_LARGE, or
// the client's own check): the batch must be split, Kafka is not down.
func tooLarge(err error) bool {
	if errors.Is(err, kafka.MessageSizeTooLarge) {
		return true
	}
	var we kafka.WriteErrors
	if errors.As(err, &we) {
		for _, e := range we {
			if e != nil && errors.Is(e, kafka.MessageSizeTooLarge) {
				return true
			}
		}
	}
	return false
}

// deliver writes m, a batch of count samples; one that Kafka refuses as too large is split in
// halves and those delivered in turn, and a single sample too large is dropped and counted.
func (p *Publisher) deliver(ctx context.Context, m kafka.Message, count int) error {
	err := p.write(ctx, []kafka.Message{m}, count)
	if err == nil || !tooLarge(err) {
		return err
	}
	var b pb.SampleBatch
	if uerr := proto.Unmarshal(m.Value, &b); uerr != nil {
		return fmt.Errorf("splitting a batch Kafka refused as too large: %w", uerr)
	}
	if len(b.Samples) <= 1 {
		p.dropped.WithLabelValues(ReasonTooLarge).Add(float64(len(b.Samples)))
		p.limit.Log(ctx, time.Now(), slog.LevelError, "sample_too_large", "a single sample is larger than Kafka accepts; dropped", "node", b.Node, "bytes", len(m.Value), "err", err)
		return nil
	}
	// Later batches are made to fit too.
	if limit := int64(len(m.Value) + len(m.Key)); limit <= p.maxMessage.Load() {
		p.maxMessage.Store(max(limit/2, 1024))
	}
	p.limit.Log(ctx, time.Now(), slog.LevelWarn, "batch_too_large", "a batch is larger than Kafka accepts; splitting it", "node", b.Node, "bytes", len(m.Value), "samples", len(b.Samples))
	half := len(b.Samples) / 2
	for _, part := range [][]*pb.Sample{b.Samples[:half], b.Samples[half:]} {
		parts, counts, err := p.encode(nil, nil, b.Node, part)
		if err != nil {
			return err
		}
		for i, pm := range parts {
			pm.Topic = m.Topic
			if err := p.deliver(ctx, pm, counts[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// write is one Kafka write of msgs, traced and counted.
func (p *Publisher) write(ctx context.Context, msgs []kafka.Message, count int) error {
	ctx, span := p.tracer.Start(ctx, "kafka.write", trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.String("messaging.destination.name", p.topic), attribute.Int("samples", count)))
	defer span.End()
	if err := p.w.WriteMessages(ctx, msgs...); err != nil {
		if ctx.Err() == nil && !tooLarge(err) {
			p.setMissing(err)
		}
		p.errors.Inc()
		span.RecordError(err)
		span.SetStatus(codes.Error, "write failed")
		return err
	}
	p.setMissing(nil)
	p.published.Add(float64(count))
	p.batches.Add(float64(len(msgs)))
	for _, m := range msgs {
		p.bytes.Add(float64(len(m.Value)))
	}
	return nil
}

// Run is the spool's sender: it drains the spool in order until ctx ends, waiting with
// exponential backoff (capped) while Kafka is unreachable. Without a spool it returns at once.
func (p *Publisher) Run(ctx context.Context) {
	if p.spool == nil {
		return
	}
	backoff := p.backoff
	for {
		// Drops held back for a minute are told, with their count, even if none follows.
		p.limit.Flush(ctx, time.Now())
		n, err := 0, p.ready(ctx) // at once, not with the first batch: /readyz tells
		if err == nil {
			n, err = p.drain(ctx)
		}
		if err == nil {
			backoff = p.backoff
			select {
			case <-ctx.Done():
				return
			case <-p.wake:
			}
			continue
		}
		if ctx.Err() != nil {
			return
		}
		if n == 0 {
			msg := "Kafka unreachable; samples stay in the spool"
			if _, ok := p.spool.(*spool.Memory); ok {
				msg = "Kafka unreachable; samples stay in the memory queue"
			}
			p.limit.Log(ctx, time.Now(), slog.LevelWarn, "unreachable", msg, "queued_batches", p.spool.Len(), "retry_in", backoff, "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, p.maxBackoff)
	}
}

// Drain delivers what is in the spool until it is empty or ctx ends (used at shutdown).
func (p *Publisher) Drain(ctx context.Context) error {
	if p.spool == nil {
		return nil
	}
	backoff := p.backoff
	for {
		if _, err := p.drain(ctx); err == nil {
			return nil
		} else if ctx.Err() != nil {
			if _, ok := p.spool.(*spool.Memory); ok {
				return fmt.Errorf("draining the memory queue (%d batches lost: no --spool.dir): %w", p.spool.Len(), err)
			}
			return fmt.Errorf("draining the Kafka spool (%d batches left in %s for the next start): %w", p.spool.Len(), p.spoolDir, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, p.maxBackoff)
	}
}

// drain writes spooled batches oldest first, each removed only once Kafka has it.
func (p *Publisher) drain(ctx context.Context) (int, error) {
	if p.spool.Len() == 0 {
		return 0, nil
	}
	if err := p.ready(ctx); err != nil {
		return 0, err
	}
	ctx, span := p.tracer.Start(ctx, "spool.drain")
	defer span.End()
	sent := 0
	defer func() { span.SetAttributes(attribute.Int("batches", sent)) }()
	for {
		rec, weight, ok, err := p.spool.Peek()
		if err != nil {
			span.RecordError(err)
			return sent, err
		}
		if !ok {
			return sent, nil
		}
		m, err := decodeRecord(rec)
		if err != nil { // the spool's CRC passed: this cannot be a torn write, only a bug
			p.dropped.WithLabelValues(spool.ReasonCorrupt).Add(float64(weight))
			if err := p.spool.Pop(); err != nil {
				return sent, err
			}
			continue
		}
		m.Topic = p.topic
		if err := p.deliver(ctx, m, int(weight)); err != nil {
			span.SetStatus(codes.Error, "kafka unreachable")
			return sent, err
		}
		if err := p.spool.Pop(); err != nil {
			return sent, err
		}
		sent++
	}
}

// encodeRecord is a spooled message: uvarint key length, key, value.
func encodeRecord(m kafka.Message) []byte {
	b := binary.AppendUvarint(make([]byte, 0, binary.MaxVarintLen32+len(m.Key)+len(m.Value)), uint64(len(m.Key)))
	b = append(b, m.Key...)
	return append(b, m.Value...)
}

func decodeRecord(b []byte) (kafka.Message, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || uint64(len(b)-k) < n {
		return kafka.Message{}, errors.New("spool record: bad key length")
	}
	return kafka.Message{Key: b[k : k+int(n)], Value: b[k+int(n):]}, nil
}
