package local

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
