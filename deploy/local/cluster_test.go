package local

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestAddConfig gives a running server a cluster definition in config.d and checks that the
// server sees it after Restart; bad names are refused.
func TestAddConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ClickHouse")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ch, err := StartClickHouse(ctx, ClickHouseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	for _, name := range []string{"", "../x", "a/b", ".hidden"} {
		if err := ch.AddConfig(name, "<yandex/>"); err == nil {
			t.Errorf("AddConfig(%q) accepted", name)
		}
	}
	port := strconv.Itoa(ch.tcpPort)
	cluster := `<yandex><remote_servers><two_shards>
        <shard><replica><host>127.0.0.1</host><port>` + port + `</port></replica></shard>
        <shard><replica><host>127.0.0.1</host><port>` + port + `</port></replica></shard>
    </two_shards></remote_servers></yandex>`
	if err := ch.AddConfig("cluster", cluster); err != nil {
		t.Fatal(err)
	}
	if err := ch.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	out, err := ch.Query(ctx, "SELECT count() FROM system.clusters WHERE cluster = 'two_shards'")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(out); got != "2" {
		t.Errorf("system.clusters has %s rows for two_shards, want 2", got)
	}
}
