// Package kafkaconn sets up segmentio/kafka-go clients the way slicemeter uses them: topic
// creation, a synchronous producer and a consumer-group reader with explicit commits, over
// plaintext or TLS and SASL (PLAIN, SCRAM-SHA-256/512): a Cluster is the brokers with the
// Security loaded from the --kafka.tls.* and --kafka.sasl.* flags (SecurityConfig, AddFlags).
//
// All of it is tested against Apache Kafka 4.4.0 and kfake (kafkaconn_test.go), and over a
// SASL_SSL listener of 4.4.0 (security_test.go). Kafka 4.x
// removed the oldest protocol versions (KIP-896); kafka-go's consumer group still sends
// OffsetCommit v2 and OffsetFetch v1, the oldest versions 4.4.0 accepts.
package kafkaconn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/slicemeter/slicemeter/internal/lograte"
)

// DefaultTimeout bounds one administrative call (metadata, topic creation) when ctx has no
// earlier deadline, so that unreachable brokers are reported instead of waited on.
const DefaultTimeout = 15 * time.Second

// ParseBrokers splits a comma- or space-separated broker list ("host:9092,host2:9092") and
// drops empty entries.
func ParseBrokers(s string) []string {
	fields := strings.FieldsFunc(s, func(r rune) bool {
		return r == ',' || r == ' ' || r == '\t' || r == '\n'
	})
	brokers := make([]string, 0, len(fields))
	for _, f := range fields {
		if f = strings.TrimSpace(f); f != "" {
			brokers = append(brokers, f)
		}
	}
	return brokers
}

// Cluster is where and how to reach Kafka: the bootstrap brokers and the security of every
// connection to them. The zero Security is plaintext without authentication.
type Cluster struct {
	Brokers  []string
	Security Security
}

func (c Cluster) client(timeout time.Duration) *kafka.Client {
	return &kafka.Client{Addr: kafka.TCP(c.Brokers...), Timeout: timeout, Transport: c.Security.transport()}
}

// EnsureTopics creates the topics that do not exist yet with the given number of partitions
// and a replication factor of min(3, brokers in the cluster), then waits until every topic
// has a leader for each of its partitions. Existing topics are left as they are.
//
// It uses kafka.Client (CreateTopics negotiated up to v5; Kafka 4.x accepts v2 and later), so
// any broker may be asked: in KRaft mode the broker forwards creation to the controller.
func (c Cluster) EnsureTopics(ctx context.Context, partitions int, topics ...string) error {
	brokers := c.Brokers
	if len(brokers) == 0 {
		return errors.New("ensure kafka topics: no brokers given")
	}
	if partitions <= 0 {
		partitions = 1
	}
	ctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	client := c.client(DefaultTimeout)
	defer closeIdle(client.Transport)
	where := strings.Join(brokers, ",")

	meta, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: topics})
	if err != nil {
		if kafkaRefused := c.Security.explain(where, err); kafkaRefused != err {
			return fmt.Errorf("ensure kafka topics: %w", kafkaRefused) // it names the brokers
		}
		return fmt.Errorf("ensure kafka topics: read metadata from brokers %s: %w", where, err)
	}
	var missing []kafka.TopicConfig
	replication := min(3, len(meta.Brokers))
	if replication < 1 {
		replication = 1
	}
	for _, t := range meta.Topics {
		if t.Error == nil {
			continue
		}
		if !errors.Is(t.Error, kafka.UnknownTopicOrPartition) {
			return fmt.Errorf("ensure kafka topics: topic %s on brokers %s: %w", t.Name, where, t.Error)
		}
		missing = append(missing, kafka.TopicConfig{
			Topic: t.Name, NumPartitions: partitions, ReplicationFactor: replication,
		})
	}
	if len(missing) > 0 {
		res, err := client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: missing})
		if err != nil {
			return fmt.Errorf("ensure kafka topics: create topics on brokers %s: %w", where, err)
		}
		for name, err := range res.Errors {
			// Another process may have created it between our metadata read and now.
			if err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
				return fmt.Errorf("ensure kafka topics: create topic %s on brokers %s: %w", name, where, err)
			}
		}
	}
	return waitForLeaders(ctx, client, where, topics)
}

// TopicMaxMessageBytes reads the topic's max.message.bytes (the broker's message.max.bytes
// unless the topic overrides it): the largest record batch the topic accepts.
func (c Cluster) TopicMaxMessageBytes(ctx context.Context, topic string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, DefaultTimeout)
	defer cancel()
	client := c.client(DefaultTimeout)
	defer closeIdle(client.Transport)
	res, err := client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: topic, ConfigNames: []string{"max.message.bytes"},
	}}})
	if err != nil {
		return 0, fmt.Errorf("reading max.message.bytes of topic %s: %w", topic, err)
	}
	for _, r := range res.Resources {
		if r.Error != nil {
			return 0, fmt.Errorf("reading max.message.bytes of topic %s: %w", topic, r.Error)
		}
		for _, e := range r.ConfigEntries {
			if e.ConfigName == "max.message.bytes" {
				n, err := strconv.ParseInt(e.ConfigValue, 10, 64)
				if err != nil || n <= 0 {
					return 0, fmt.Errorf("topic %s: max.message.bytes %q is not a size", topic, e.ConfigValue)
				}
				return n, nil
			}
		}
	}
	return 0, fmt.Errorf("topic %s: the broker did not say its max.message.bytes", topic)
}

// waitForLeaders polls metadata until every partition of every topic has a leader, because a
// producer writing right after creation would otherwise see LeaderNotAvailable.
func waitForLeaders(ctx context.Context, client *kafka.Client, where string, topics []string) error {
	for {
		meta, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: topics})
		var notReady error
		if err != nil {
			notReady = err
		} else {
			for _, t := range meta.Topics {
				if t.Error != nil {
					notReady = fmt.Errorf("topic %s: %w", t.Name, t.Error)
					break
				}
				if len(t.Partitions) == 0 {
					notReady = fmt.Errorf("topic %s has no partitions yet", t.Name)
					break
				}
				for _, p := range t.Partitions {
					if p.Error != nil || p.Leader.Host == "" {
						notReady = fmt.Errorf("topic %s partition %d has no leader yet", t.Name, p.ID)
						break
					}
				}
			}
		}
		if notReady == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("ensure kafka topics: waiting for leaders on brokers %s: %w (last: %v)", where, ctx.Err(), notReady)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// NewWriter returns a synchronous producer: WriteMessages returns once all in-sync replicas
// have the messages. The key is hashed to pick the partition (murmur2, like the Java client,
// so that other producers place the same key on the same partition). An empty topic means
// each message names its own topic.
func (c Cluster) NewWriter(topic string, logger *slog.Logger) *kafka.Writer {
	return &kafka.Writer{
		Addr:         kafka.TCP(c.Brokers...),
		Transport:    c.Security.transport(),
		Topic:        topic,
		Balancer:     &kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireAll,
		Compression:  kafka.Zstd,
		// The default (1 s) would delay every synchronous write by up to a second.
		BatchTimeout: 5 * time.Millisecond,
		WriteTimeout: 10 * time.Second,
		ReadTimeout:  10 * time.Second,
		MaxAttempts:  5,
		ErrorLogger:  ErrorLogger(logger),
		// Topics are created explicitly (EnsureTopics) with the intended partition count.
		AllowAutoTopicCreation: false,
	}
}

// GroupReaderConfig is the consumer-group configuration slicemeter uses: offsets are
// committed only by an explicit CommitMessages (CommitInterval 0), a new group starts at the
// oldest message, and a fetch returns within MaxWait when there is little data.
func (c Cluster) GroupReaderConfig(groupID string, logger *slog.Logger, topics ...string) kafka.ReaderConfig {
	return kafka.ReaderConfig{
		Brokers:           c.Brokers,
		Dialer:            c.Security.dialer(),
		GroupID:           groupID,
		GroupTopics:       topics,
		CommitInterval:    0,
		StartOffset:       kafka.FirstOffset,
		MinBytes:          1,
		MaxBytes:          16 << 20,
		MaxWait:           250 * time.Millisecond,
		HeartbeatInterval: time.Second,
		SessionTimeout:    10 * time.Second,
		RebalanceTimeout:  10 * time.Second,
		JoinGroupBackoff:  time.Second,
		ReadBackoffMin:    50 * time.Millisecond,
		ReadBackoffMax:    time.Second,
		// Partitions added to a topic are picked up without restarting the collector.
		WatchPartitionChanges:  true,
		PartitionWatchInterval: 10 * time.Second,
		ErrorLogger:            ErrorLogger(logger),
	}
}

// NewGroupReader returns a consumer-group reader configured by GroupReaderConfig.
func (c Cluster) NewGroupReader(groupID string, logger *slog.Logger, topics ...string) *kafka.Reader {
	return kafka.NewReader(c.GroupReaderConfig(groupID, logger, topics...))
}

// ErrorLogger adapts a slog.Logger to kafka-go's error logger (nil logs nothing).
//
// A read of an idle partition that times out is not an error: kafka-go logs "the kafka reader
// got an unknown error reading partition N … i/o timeout" when a fetch waits longer than its
// deadline for data that never comes, then reconnects and goes on (a healthy collector on idle
// partitions logged 135 of them in 12.5 minutes). Those are logged at debug. Every other
// message is a warning, at most one line per kind of message (its format) per ErrorLogEvery,
// saying how many were not logged: a broker that is down makes every partition's reader
// complain on every retry.
func ErrorLogger(logger *slog.Logger) kafka.Logger {
	if logger == nil {
		return nil
	}
	limit := lograte.New(logger, ErrorLogEvery)
	return kafka.LoggerFunc(func(format string, args ...any) {
		detail := fmt.Sprintf(format, args...)
		if idleReadTimeout(format, args) {
			logger.Debug("kafka client: a read of an idle partition timed out; reconnecting", "detail", detail)
			return
		}
		limit.Log(context.Background(), time.Now(), slog.LevelWarn, format, "kafka client", "detail", detail)
	})
}

// ErrorLogEvery is how often ErrorLogger logs one kind of message at most.
const ErrorLogEvery = time.Minute

// idleReadTimeout reports whether kafka-go's message is a partition read that timed out.
func idleReadTimeout(format string, args []any) bool {
	if !strings.Contains(format, "error reading partition") {
		return false
	}
	for _, a := range args {
		if err, ok := a.(error); ok {
			var ne net.Error
			if errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
				return true
			}
		}
	}
	return false
}
