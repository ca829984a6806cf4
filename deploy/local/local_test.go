package local

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// testLogger sends the harness's messages to the test log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func TestFreePort(t *testing.T) {
	a, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	if a <= 0 || a > 65535 {
		t.Fatalf("FreePort() = %d", a)
	}
}

func TestClickHouse(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real ClickHouse server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	began := time.Now()
	ch, err := StartClickHouse(ctx, ClickHouseOptions{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ClickHouse started in %v", time.Since(began).Round(time.Millisecond))
	defer ch.Close()

	if !strings.HasPrefix(ch.Addr(), "127.0.0.1:") || ch.Addr() == "127.0.0.1:9000" {
		t.Errorf("Addr() = %q, want 127.0.0.1 and not the system instance's port", ch.Addr())
	}
	if want := "clickhouse://" + ch.Addr() + "/default"; ch.DSN("default") != want {
		t.Errorf("DSN(default) = %q, want %q", ch.DSN("default"), want)
	}
	if ch.Pid() <= 0 {
		t.Errorf("Pid() = %d while running", ch.Pid())
	}
	version, err := ch.Query(ctx, "SELECT version()")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ClickHouse version %s", strings.TrimSpace(version))

	// The same dialect file chDB checks must run on this server too.
	const db = "local-test" // a name that needs quoting
	if err := ch.CreateDatabase(ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := ch.CreateDatabase(ctx, db); err != nil {
		t.Fatalf("CreateDatabase is not idempotent: %v", err)
	}
	runSQLFile(t, ctx, ch, db, filepath.Join("testdata", "dialect.sql"))
	count := func() string {
		t.Helper()
		out, err := ch.Query(ctx, "SELECT count() FROM "+quoteIdent(db)+".samples_check")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}
	if got := count(); got != "1" {
		t.Fatalf("count() = %q after the insert, want 1", got)
	}

	// Stop keeps the data; Restart brings it back on the same port.
	addr := ch.Addr()
	began = time.Now()
	if err := ch.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("ClickHouse stopped in %v", time.Since(began).Round(time.Millisecond))
	if ch.Pid() != 0 {
		t.Errorf("Pid() = %d after Stop", ch.Pid())
	}
	if err := dialable(ctx, addr); err == nil {
		t.Errorf("%s still accepts connections after Stop", addr)
	}
	began = time.Now()
	if err := ch.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("ClickHouse restarted in %v", time.Since(began).Round(time.Millisecond))
	if ch.Addr() != addr {
		t.Errorf("Addr() = %q after Restart, want %q", ch.Addr(), addr)
	}
	if got := count(); got != "1" {
		t.Errorf("count() = %q after Restart, want 1", got)
	}

	// A server killed behind the harness's back (the OOM killer, a crash) is named by Died,
	// with how it ended and where to look; a running or stopped one is not.
	if err := ch.Died(); err != nil {
		t.Errorf("Died() = %v while running", err)
	}
	if err := syscall.Kill(ch.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for ch.Died() == nil && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if err := ch.Died(); err == nil || !strings.Contains(err.Error(), "signal: killed") || !strings.Contains(err.Error(), "memory available") {
		t.Errorf("Died() after SIGKILL = %v, want the signal and the machine's state", err)
	}
	if err := ch.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ch.Died(); err != nil {
		t.Errorf("Died() = %v after Restart", err)
	}

	dir := ch.Dir()
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still exists after Close: %v", dir, err)
	}
	if err := ch.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := ch.Restart(ctx); err == nil {
		t.Error("Restart after Close succeeded")
	}
}

// runSQLFile runs each ';'-terminated statement of path in database db.
func runSQLFile(t *testing.T, ctx context.Context, ch *ClickHouse, db, path string) {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var stmt []string
	for _, line := range strings.Split(string(text), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "--") {
			continue
		}
		stmt = append(stmt, line)
		if strings.HasSuffix(strings.TrimSpace(line), ";") {
			q := strings.TrimSuffix(strings.TrimSpace(strings.Join(stmt, "\n")), ";")
			stmt = nil
			// Each client call is a session of its own: qualify the table with the database.
			if _, err := ch.Query(ctx, strings.ReplaceAll(q, "samples_check", quoteIdent(db)+".samples_check")); err != nil {
				t.Fatalf("%s on ClickHouse 18.16: %v", path, err)
			}
		}
	}
}

func TestKafka(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real Kafka broker")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	began := time.Now()
	k, err := StartKafka(ctx, KafkaOptions{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Kafka started in %v", time.Since(began).Round(time.Millisecond))
	defer k.Close()
	if !strings.HasPrefix(k.Brokers(), "127.0.0.1:") || k.Pid() <= 0 {
		t.Fatalf("Brokers() = %q, Pid() = %d", k.Brokers(), k.Pid())
	}

	const topic, group = "local-test", "local-test-group"
	began = time.Now()
	produce(t, ctx, k.Brokers(), topic, "before restart")
	if got := consume(t, ctx, k.Brokers(), topic, group); got != "before restart" {
		t.Fatalf("consumed %q, want %q", got, "before restart")
	}
	t.Logf("produced and consumed one message as a group in %v", time.Since(began).Round(time.Millisecond))

	brokers := k.Brokers()
	began = time.Now()
	if err := k.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Kafka stopped in %v", time.Since(began).Round(time.Millisecond))
	if err := dialable(ctx, brokers); err == nil {
		t.Errorf("%s still accepts connections after Stop", brokers)
	}
	began = time.Now()
	if err := k.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("Kafka restarted in %v", time.Since(began).Round(time.Millisecond))
	if k.Brokers() != brokers {
		t.Errorf("Brokers() = %q after Restart, want %q", k.Brokers(), brokers)
	}

	// The group's committed offset survived: it gets the new message, not the old one again.
	produce(t, ctx, k.Brokers(), topic, "after restart")
	if got := consume(t, ctx, k.Brokers(), topic, group); got != "after restart" {
		t.Fatalf("consumed %q after Restart, want %q", got, "after restart")
	}

	dir := k.Dir()
	if err := k.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still exists after Close: %v", dir, err)
	}
}

func produce(t *testing.T, ctx context.Context, brokers, topic, value string) {
	t.Helper()
	w := &kafka.Writer{
		Addr:                   kafka.TCP(brokers),
		Topic:                  topic,
		AllowAutoTopicCreation: true,
		RequiredAcks:           kafka.RequireAll,
		BatchTimeout:           10 * time.Millisecond,
	}
	defer w.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		// The first write to an auto-created topic can find no leader yet.
		err := w.WriteMessages(ctx, kafka.Message{Key: []byte("k"), Value: []byte(value)})
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("producing to %s: %v", topic, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func consume(t *testing.T, ctx context.Context, brokers, topic, group string) string {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:     []string{brokers},
		Topic:       topic,
		GroupID:     group,
		StartOffset: kafka.FirstOffset,
		MaxWait:     100 * time.Millisecond,
	})
	defer r.Close()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	m, err := r.FetchMessage(ctx)
	if err != nil {
		t.Fatalf("consuming %s as group %s: %v", topic, group, err)
	}
	if err := r.CommitMessages(ctx, m); err != nil {
		t.Fatalf("committing offset %d: %v", m.Offset, err)
	}
	return string(m.Value)
}

func TestCheckWithChDB(t *testing.T) {
	if testing.Short() {
		t.Skip("runs chDB")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := CheckWithChDB(ctx, filepath.Join("testdata", "dialect.sql")); err != nil {
		t.Fatal(err)
	}
	err := CheckWithChDB(ctx, filepath.Join("testdata", "bad.sql"))
	if err == nil {
		t.Fatal("CheckWithChDB(bad.sql) succeeded")
	}
	for _, want := range []string{"bad.sql:2", "no_such_column"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %q:\n%v", want, err)
		}
	}
}

func TestTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	var b strings.Builder
	for i := range 100 {
		b.WriteString("line " + strconv.Itoa(i) + "\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	got := tail(path, 3, 1<<10)
	if want := "line 97\nline 98\nline 99"; got != want {
		t.Errorf("tail = %q, want %q", got, want)
	}
	if got := tail(path, 1000, 20); strings.HasPrefix(got, "ne") || got == "" {
		t.Errorf("tail with a byte limit kept a cut first line: %q", got)
	}
}

func TestClusterID(t *testing.T) {
	id, err := clusterID()
	if err != nil {
		t.Fatal(err)
	}
	if len(id) != 22 || id[0] == '-' {
		t.Errorf("clusterID() = %q, want 22 URL-safe base64 characters not starting with '-'", id)
	}
}

// A server that cannot start must fail fast and say why, from its own log.
func TestClickHouseStartFailureShowsLog(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real ClickHouse server")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	server, client, err := findClickHouse()
	if err != nil {
		t.Fatal(err)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	c := &ClickHouse{service: service{name: "ClickHouse", log: testLogger(t), dir: t.TempDir()}, server: server, client: client}
	c.logs = c.logFiles
	if err := c.pickPorts(); err != nil {
		t.Fatal(err)
	}
	c.tcpPort = taken.Addr().(*net.TCPAddr).Port
	began := time.Now()
	err = c.start(ctx)
	if err == nil {
		c.Stop()
		t.Fatal("started on a port that was taken")
	}
	if !strings.Contains(err.Error(), "Address already in use") || !portInUse(c.logFiles()) {
		t.Errorf("error does not carry the log's reason:\n%v", err)
	}
	t.Logf("failed after %v: %v", time.Since(began).Round(time.Millisecond), err)
	if took := time.Since(began); took > 20*time.Second {
		t.Errorf("failing took %v; the exit should be noticed at once", took)
	}
}
