package e2e

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/e2e/apptest"
)

// TestStartupLine: each service logs one line at start with its effective configuration (the
// flags given, from the environment, and the defaults), its ClickHouse password masked,
// before it connects to anything.
//
//	go test -count=1 -run TestStartupLine ./e2e/
func TestStartupLine(t *testing.T) {
	t.Parallel()
	const password = "startup-line-Pa55word-7f3a"
	apptest.Secret(t, password)
	// Nobody listens there: the line comes before any connection (attribution then exits 1).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nowhere := ln.Addr().String()
	ln.Close()
	dsn := fmt.Sprintf("clickhouse://slicemeter:%s@%s/metering", password, nowhere)
	for _, tc := range []struct {
		command string
		args    []string
		want    []string // in the line
	}{
		{"collector", []string{"--kafka.brokers", nowhere, "--clickhouse.dsn", dsn},
			[]string{"config.kafka.brokers=" + nowhere, "config.clickhouse.dsn=clickhouse://slicemeter:xxxxx@" + nowhere, "config.retention.raw=", "config.kafka.group=slicemeter-collector"}},
		{"attribution", []string{"--clickhouse.dsn", dsn, "--api.insecure-no-auth", "--scenario", filepath.Join(scenarios, "mig-basic.yaml")},
			[]string{"config.clickhouse.dsn=clickhouse://slicemeter:xxxxx@" + nowhere, "config.attribution.interval=1m0s", "config.api.insecure-no-auth=true"}},
		{"exporter", []string{"--source", "sim", "--scenario", filepath.Join(scenarios, "mig-basic.yaml"), "--kafka.brokers", nowhere},
			[]string{"config.source=sim", "config.kafka.brokers=" + nowhere, "config.interval=100ms"}},
	} {
		t.Run(tc.command, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			p := apptest.Start(t, ctx, apptest.Service{Command: tc.command, Args: tc.args, NoListen: true})
			if !p.LogContains("starting slicemeter " + tc.command) {
				t.Fatalf("no start-up line:\n%s", p.LogTail(10))
			}
			lines := regexp.MustCompile(`(?m)^.*msg="starting slicemeter `+tc.command+`".*$`).FindAllString(p.Log(), -1)
			if len(lines) != 1 {
				t.Fatalf("%d start-up lines, want 1:\n%s", len(lines), p.LogTail(10))
			}
			line := lines[0]
			for _, w := range append(tc.want, "version=", "config.log.level=info", "config.web.listen-address=") {
				if !strings.Contains(line, w) {
					t.Errorf("the start-up line lacks %q:\n%s", w, line)
				}
			}
			if strings.Contains(line, password) {
				t.Error("the start-up line holds the password")
			}
		})
	}
}
