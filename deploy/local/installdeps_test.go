package local

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// installs is what the Makefile target's recipe installs: every install-deps.sh it would run
// (`make -n`, nothing runs), asked for its list.
func installs(t *testing.T, target string) []string {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make on PATH")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, "make", "-n", "-C", root, target).Output()
	if err != nil {
		t.Fatalf("make -n %s: %v", target, err)
	}
	var items []string
	runs := 0
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		i := slices.IndexFunc(f, func(s string) bool { return strings.HasSuffix(s, "install-deps.sh") })
		if i < 0 {
			continue
		}
		runs++
		args := append(append([]string{filepath.Join(root, f[i])}, f[i+1:]...), "--list")
		list, err := exec.CommandContext(ctx, "bash", args...).Output()
		if err != nil {
			t.Fatalf("bash %s: %v", strings.Join(args, " "), err)
		}
		items = append(items, strings.Fields(strings.ReplaceAll(string(list), " ", "/"))...)
	}
	if runs == 0 {
		t.Fatalf("make -n %s runs no install-deps.sh:\n%s", target, out)
	}
	return items
}

// TestInstallDepsDemo: `make demo` installs ClickHouse and nothing else (its broker is kfake, in
// the process), so that a fresh machine runs the demo in minutes; `make test` still installs
// every tool the tests start or call.
func TestInstallDepsDemo(t *testing.T) {
	demo := installs(t, "demo")
	want := []string{"apt/clickhouse-client", "apt/clickhouse-server"}
	slices.Sort(demo)
	if !slices.Equal(slices.Compact(demo), want) {
		t.Errorf("make demo installs %q, want only %q: a test-only tool in the demo's path costs minutes on a fresh machine", demo, want)
	}
	test := installs(t, "test")
	for _, tool := range []string{"apt/clickhouse-server", "apt/etcd-server", "apt/chromium", "apt/prometheus", "apt/openjdk-17-jre-headless",
		"apt/protobuf-compiler", "pip/chdb", "venv/focus-validator==1.0.0", "maven/kafka-" + KafkaVersion, "maven/zookeeper-" + ZooKeeperVersion,
		"build/kube-apiserver-" + KubeAPIServerVersion, "build/helm-" + HelmVersion} {
		if !slices.Contains(test, tool) {
			t.Errorf("make test does not install %s (it installs %q)", tool, test)
		}
	}
}
