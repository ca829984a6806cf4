package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// AddConfig writes an extra server configuration file, config.d/NAME.xml, which the server
// merges into its config.xml (e.g. remote_servers for a cluster, zookeeper, or a <kafka>
// section for the Kafka table engine's librdkafka). xml is the file's whole content, root
// element <yandex>. It takes effect at the next Restart.
func (c *ClickHouse) AddConfig(name, xml string) error {
	if name == "" || strings.ContainsAny(name, `/\`) || strings.HasPrefix(name, ".") {
		return fmt.Errorf("clickhouse extra config: name %q must be a plain file name", name)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errors.New("clickhouse extra config: server already closed")
	}
	dir := filepath.Join(c.dir, "config.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("clickhouse extra config: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".xml"), []byte(xml), 0o644); err != nil {
		return fmt.Errorf("clickhouse extra config %s: %w", name, err)
	}
	return nil
}

// ClusterOptions configures StartCluster.
type ClusterOptions struct {
	Name   string // the <remote_servers> entry, e.g. "slicemeter"
	Shards int    // one ClickHouse server per shard, one replica each; default 2
	// Profile holds settings for every server's default user profile (users.d): clients of a
	// cluster need some (migrations.ClusterSettings) that clickhouse-go cannot send to 18.16.
	Profile map[string]string
	Logger  *slog.Logger
}

// Cluster is a ClickHouse cluster of Shards servers sharing one ZooKeeper, on loopback.
type Cluster struct {
	ZooKeeper *ZooKeeper
	Nodes     []*ClickHouse
}

// StartCluster starts ZooKeeper and the servers, gives each the cluster definition (every
// shard with internal_replication, as Replicated tables need), its {shard} and {replica}
// macros, the distributed DDL queue and an interserver port, then restarts them with it.
func StartCluster(ctx context.Context, opts ClusterOptions) (*Cluster, error) {
	if opts.Shards <= 0 {
		opts.Shards = 2
	}
	c := &Cluster{Nodes: make([]*ClickHouse, opts.Shards)}
	errs := make([]error, opts.Shards+1)
	var wg sync.WaitGroup
	wg.Go(func() { c.ZooKeeper, errs[opts.Shards] = StartZooKeeper(ctx, ZooKeeperOptions{Logger: opts.Logger}) })
	for i := range c.Nodes {
		wg.Go(func() { c.Nodes[i], errs[i] = StartClickHouse(ctx, ClickHouseOptions{Logger: opts.Logger}) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.Close()
		return nil, fmt.Errorf("start cluster %s: %w", opts.Name, err)
	}
	var shards strings.Builder
	for _, ch := range c.Nodes {
		host, port, err := net.SplitHostPort(ch.Addr())
		if err != nil {
			c.Close()
			return nil, err
		}
		fmt.Fprintf(&shards, "<shard><internal_replication>true</internal_replication><replica><host>%s</host><port>%s</port></replica></shard>\n", host, port)
	}
	var profile strings.Builder
	for name, value := range opts.Profile {
		fmt.Fprintf(&profile, "<%[1]s>%[2]s</%[1]s>", name, value)
	}
	for i, ch := range c.Nodes {
		interserver, err := FreePort()
		if err != nil {
			c.Close()
			return nil, err
		}
		cfg := fmt.Sprintf(`<?xml version="1.0"?>
<yandex>
    <remote_servers><%[1]s>
%[2]s    </%[1]s></remote_servers>
    <macros><shard>%02[3]d</shard><replica>replica_%[3]d</replica></macros>
    <distributed_ddl><path>/clickhouse/task_queue/ddl</path></distributed_ddl>
    <interserver_http_host>127.0.0.1</interserver_http_host>
    <interserver_http_port>%[4]d</interserver_http_port>
</yandex>
`, opts.Name, shards.String(), i+1, interserver)
		if err := ch.AddConfig("zookeeper", c.ZooKeeper.ClickHouseConfig()); err != nil {
			c.Close()
			return nil, err
		}
		if err := ch.AddConfig("cluster", cfg); err != nil {
			c.Close()
			return nil, err
		}
		// users.d/ is merged into users.xml as config.d/ is into config.xml.
		users := filepath.Join(ch.Dir(), "users.d")
		if err := os.MkdirAll(users, 0o755); err != nil {
			c.Close()
			return nil, err
		}
		xml := `<?xml version="1.0"?><yandex><profiles><default>` + profile.String() + `</default></profiles></yandex>`
		if err := os.WriteFile(filepath.Join(users, "cluster.xml"), []byte(xml), 0o644); err != nil {
			c.Close()
			return nil, err
		}
	}
	for i, ch := range c.Nodes {
		wg.Go(func() { errs[i] = ch.Restart(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs[:opts.Shards]...); err != nil {
		c.Close()
		return nil, fmt.Errorf("restart cluster %s with its configuration: %w", opts.Name, err)
	}
	return c, nil
}

// Close stops every server and ZooKeeper.
func (c *Cluster) Close() error {
	var errs []error
	for _, ch := range c.Nodes {
		if ch != nil {
			errs = append(errs, ch.Close())
		}
	}
	if c.ZooKeeper != nil {
		errs = append(errs, c.ZooKeeper.Close())
	}
	return errors.Join(errs...)
}
