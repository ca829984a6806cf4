package collector

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"

	pb "github.com/slicemeter/slicemeter/schemas/slicemeterpb"
)

// Headers of a dead-letter message (besides the original message's own headers).
const (
	HeaderReason          = "slicemeter-reason"        // a fixed code, e.g. "decode", "missing_ts"
	HeaderReasonDetail    = "slicemeter-reason-detail" // for people: which field, which sample
	HeaderField           = "slicemeter-field"         // the refused field (proto name), e.g. "sm_active"; absent for a whole message
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
	if r.field != "" {
		headers = append(headers, kafka.Header{Key: HeaderField, Value: []byte(r.field)})
	}
	value := msg.Value
	if len(msg.Key)+len(value) > maxDeadLetterValue {
		value = nil
		headers = append(headers, kafka.Header{Key: HeaderValueOmitted, Value: []byte(strconv.Itoa(len(msg.Value)))})
	}
	b.deadLetters = append(b.deadLetters, kafka.Message{Key: msg.Key, Value: value, Headers: headers})
}

// writeDeadLetters writes b's dead letters to the dead-letter topic and forgets them.
func (c *Collector) writeDeadLetters(ctx context.Context, w *kafka.Writer, b *batch) error {
	if len(b.deadLetters) == 0 {
		return nil
	}
	if err := w.WriteMessages(ctx, b.deadLetters...); err != nil {
		c.metrics.deadLetterErrs.Inc()
		return fmt.Errorf("write %d messages to %s: %w", len(b.deadLetters), pb.TopicDeadLetter, err)
	}
	for _, dl := range b.deadLetters {
		c.metrics.deadLettered.WithLabelValues(header(dl, HeaderSourceTopic), header(dl, HeaderReason)).Inc()
	}
	clear(b.deadLetters)
	b.deadLetters = b.deadLetters[:0]
	return nil
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
