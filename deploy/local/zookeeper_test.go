package local

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestZooKeeper starts a standalone ZooKeeper and asks it for its state with the four-letter
// word srvr: a real server in standalone mode on the harness's port.
func TestZooKeeper(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ZooKeeper")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	zk, err := StartZooKeeper(ctx, ZooKeeperOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer zk.Close()
	out, err := fourLetterWord(ctx, zk.Addr(), "srvr")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "Mode: standalone") || !strings.Contains(out, "Zookeeper version: "+ZooKeeperVersion) {
		t.Errorf("srvr answered %q, want a standalone %s", out, ZooKeeperVersion)
	}
	if !strings.Contains(zk.ClickHouseConfig(), zk.Addr()[len("127.0.0.1:"):]) {
		t.Errorf("ClickHouseConfig() lacks the port of %s:\n%s", zk.Addr(), zk.ClickHouseConfig())
	}
	if err := zk.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := fourLetterWord(ctx, zk.Addr(), "srvr"); err == nil {
		t.Error("ZooKeeper still answers after Close")
	}
}
