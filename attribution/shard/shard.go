// Package shard shares the nodes between attribution replicas through a Kafka consumer group:
// every replica joins the group on a small topic of its own, and the group coordinator's
// partition assignment says which nodes each replica attributes (service.Shards). Kafka does
// the membership, the failure detection and the rebalancing; nothing here is a protocol of its
// own, and no message is ever written to or read from the topic.
//
// A node belongs to partition Partition(node, P) = FNV-1a 32-bit of the node name mod P, where
// P is the topic's partition count read from Kafka's metadata at every generation (the
// --attribution.shard.partitions flag only sizes the topic when it has to be created), so
// every replica maps a node to the same partition, and the generation's assignment gives each
// partition to exactly one replica.
//
// The count must not change while replicas run. If partitions are added anyway, kafka-go's
// partition watcher ends every replica's generation within its interval, and each one reads
// the new count before it owns nodes again; until every replica has, a node may be attributed
// by two replicas (harmless: the same figures are stored) or by none (its minutes are caught
// up after the next rebalance).
package shard

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/slicemeter/slicemeter/attribution/service"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
	"github.com/slicemeter/slicemeter/internal/lograte"
)

// Partition is the partition of the shard topic that node falls in, out of partitions:
// FNV-1a (32 bit) of the node name, mod partitions. Every replica must compute the same, so
// this never changes.
func Partition(node string, partitions int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(node))
	return int(h.Sum32() % uint32(partitions))
}

// Config is how a replica joins the group.
type Config struct {
	Cluster kafkaconn.Cluster
	// Group is the consumer group's ID: the replicas of one deployment share it.
	Group string
	// Topic is the group's topic; Partitions is its partition count when it has to be created.
	Topic      string
	Partitions int
	// SessionTimeout is how long the coordinator waits for a silent replica before it gives its
	// nodes to the others (the broker's group.min.session.timeout.ms, 6 s by default, is the
	// least it accepts).
	SessionTimeout time.Duration
}

// timings are the consumer group's, derived from the session timeout so that a replica cut
// off from Kafka stops attributing (its heartbeat fails: interval + request timeout) before
// the coordinator gives its nodes to another (the session timeout).
func (c Config) timings() (heartbeat, request time.Duration) {
	return c.SessionTimeout / 10, c.SessionTimeout / 3
}

// Group is this replica's membership of the shard group. Its Assignment is what the current
// generation gives it. A nil *Group owns every node (no sharding).
type Group struct {
	cfg     Config
	logger  *slog.Logger
	logs    *lograte.Limiter
	metrics *metrics
	dialer  *kafka.Dialer

	state  atomic.Pointer[generation]
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// generation is what one generation gives this replica.
type generation struct {
	id         int64
	partitions int    // the topic's partition count, which Partition takes
	owned      []bool // by partition
	n          int    // owned partitions
}

// Start joins the group in the background until ctx ends or Close is called; Assignment says
// what it owns meanwhile. Kafka being unreachable is not an error: it retries, logging once a
// minute, and owns nothing until it joins.
func Start(ctx context.Context, cfg Config, logger *slog.Logger, reg prometheus.Registerer) (*Group, error) {
	// Flags.Config names the flag; these are a caller's mistakes (cfg is not printed: its SASL
	// mechanism holds the password).
	switch {
	case len(cfg.Cluster.Brokers) == 0, cfg.Group == "", cfg.Topic == "":
		return nil, fmt.Errorf("attribution shard group: brokers %q, group %q and topic %q: expected all three", cfg.Cluster.Brokers, cfg.Group, cfg.Topic)
	case cfg.Partitions < 1 || cfg.SessionTimeout <= 0:
		return nil, fmt.Errorf("attribution shard group: %d partitions, session timeout %s: expected both positive", cfg.Partitions, cfg.SessionTimeout)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	_, request := cfg.timings()
	g := &Group{
		cfg: cfg, logger: logger, logs: lograte.New(logger, time.Minute), metrics: m,
		dialer: &kafka.Dialer{Timeout: request, DualStack: true, TLS: cfg.Cluster.Security.TLS, SASLMechanism: cfg.Cluster.Security.SASL},
		done:   make(chan struct{}),
	}
	ctx, g.cancel = context.WithCancel(ctx)
	go g.run(ctx)
	return g, nil
}

// Assignment is service.Shards': ok is false before the first generation and between the end
// of a generation and the next one.
func (g *Group) Assignment() (service.Assignment, bool) {
	if g == nil {
		return service.Assignment{Owns: func(string) bool { return true }}, true
	}
	s := g.state.Load()
	if s == nil {
		return service.Assignment{}, false
	}
	return service.Assignment{Generation: s.id, Owns: func(node string) bool {
		return s.owned[Partition(node, s.partitions)]
	}}, true
}

// Close leaves the group, so that the others take this replica's nodes at once instead of
// after the session timeout, and waits for it.
func (g *Group) Close() error {
	if g == nil {
		return nil
	}
	g.once.Do(g.cancel)
	<-g.done
	return nil
}

// run creates the topic if it is missing, then follows the group's generations until ctx ends.
func (g *Group) run(ctx context.Context) {
	defer close(g.done)
	where := strings.Join(g.cfg.Cluster.Brokers, ",")
	for wait := time.Second; ; wait = min(2*wait, 30*time.Second) {
		err := g.cfg.Cluster.EnsureTopics(ctx, g.cfg.Partitions, g.cfg.Topic)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		g.logs.Log(ctx, time.Now(), slog.LevelWarn, "topic", "attribution shards: cannot create or find the shard topic; attributing no node until it can",
			"topic", g.cfg.Topic, "brokers", where, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
	heartbeat, request := g.cfg.timings()
	cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID:                g.cfg.Group,
		Brokers:           g.cfg.Cluster.Brokers,
		Dialer:            g.dialer,
		Topics:            []string{g.cfg.Topic},
		HeartbeatInterval: heartbeat,
		SessionTimeout:    g.cfg.SessionTimeout,
		// Survivors rejoin within a heartbeat; the coordinator waits this long for them.
		RebalanceTimeout:       g.cfg.SessionTimeout,
		JoinGroupBackoff:       time.Second,
		WatchPartitionChanges:  true,
		PartitionWatchInterval: 10 * time.Second,
		Timeout:                request,
		// Membership only: no offset is ever committed (kafka-go fetches them at every
		// generation and finds none, which is harmless).
		StartOffset: kafka.FirstOffset,
	})
	if err != nil { // only a config kafka-go refuses, which Start's checks rule out
		g.logger.Error("attribution shards: cannot create the consumer group; attributing no node", "group", g.cfg.Group, "err", err)
		return
	}
	defer func() {
		// Leaves the group: the generation ends (follow clears the assignment) first.
		_ = cg.Close()
		g.logger.Info("attribution shards: left the group", "group", g.cfg.Group)
	}()
	for {
		gen, err := cg.Next(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, kafka.ErrGroupClosed) {
				return
			}
			// kafka-go backs off before it tries again (or the broker throttles a rebalance).
			level, reason := slog.LevelWarn, "join"
			if kafkaconn.Refused(err) { // retried too: the credentials may be granted meanwhile
				level, reason = slog.LevelError, "refused"
			}
			g.logs.Log(ctx, time.Now(), level, reason, "attribution shards: cannot join the group yet; attributing no node until it can",
				"group", g.cfg.Group, "brokers", where, "security", g.cfg.Cluster.Security.String(), "err", err)
			continue
		}
		g.metrics.rebalances.Inc()
		gen.Start(func(gctx context.Context) { g.follow(gctx, gen) })
	}
}

// follow owns what gen assigns until the generation ends (a rebalance, a lost coordinator, or
// Close); kafka-go waits for it to return before it joins the next generation.
func (g *Group) follow(ctx context.Context, gen *kafka.Generation) {
	var ids []int
	for _, p := range gen.Assignments[g.cfg.Topic] {
		ids = append(ids, p.ID)
	}
	slices.Sort(ids)
	partitions, err := g.topicPartitions(ctx, ids)
	if err != nil {
		return // the generation ended before the count could be read
	}
	s := &generation{id: int64(gen.ID), partitions: partitions, owned: make([]bool, partitions)}
	for _, id := range ids {
		if id < partitions {
			s.owned[id] = true
			s.n++
		}
	}
	g.state.Store(s)
	g.metrics.generation.Set(float64(s.id))
	g.metrics.partitions.Set(float64(s.n))
	g.logger.Info("attribution shards: owning partitions", "group", g.cfg.Group, "generation", s.id, "member", gen.MemberID,
		"owned", s.n, "partitions", partitions, "ids", idRanges(ids))
	<-ctx.Done()
	g.state.Store(nil)
	g.metrics.partitions.Set(0)
	g.logger.Info("attribution shards: generation ended; owning no node until the next", "group", g.cfg.Group, "generation", s.id)
}

// topicPartitions reads the topic's partition count from Kafka's metadata, again until it
// covers the assigned partitions (a broker's metadata may lag right after partitions were
// added), until ctx ends.
func (g *Group) topicPartitions(ctx context.Context, assigned []int) (int, error) {
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		n, err := g.readPartitions(ctx)
		if err == nil && (len(assigned) == 0 || n > assigned[len(assigned)-1]) {
			return n, nil
		}
		if err == nil {
			err = fmt.Errorf("the topic has %d partitions, fewer than assigned (%s)", n, idRanges(assigned))
		}
		g.logs.Log(ctx, time.Now(), slog.LevelWarn, "metadata", "attribution shards: cannot read the shard topic's partition count; attributing no node until it can",
			"topic", g.cfg.Topic, "err", err)
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(wait):
		}
	}
}

func (g *Group) readPartitions(ctx context.Context) (int, error) {
	var last error
	for _, b := range g.cfg.Cluster.Brokers {
		ps, err := g.dialer.LookupPartitions(ctx, "tcp", b, g.cfg.Topic)
		if err == nil && len(ps) > 0 {
			return len(ps), nil
		}
		if err == nil {
			err = fmt.Errorf("broker %s knows no partition of topic %s", b, g.cfg.Topic)
		}
		last = err
	}
	return 0, fmt.Errorf("reading the partitions of topic %s: %w", g.cfg.Topic, last)
}

// idRanges writes sorted partition IDs as ranges ("0-20,40"), for logs.
func idRanges(ids []int) string {
	var b strings.Builder
	for i := 0; i < len(ids); {
		j := i
		for j+1 < len(ids) && ids[j+1] == ids[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(ids[i]))
		if j > i {
			b.WriteString("-" + strconv.Itoa(ids[j]))
		}
		i = j + 1
	}
	return b.String()
}
