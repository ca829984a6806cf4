package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"
	"time"
)

// clickHouseStartTimeout bounds the wait for a started server to answer SELECT 1.
const clickHouseStartTimeout = 60 * time.Second

// installHint is appended to errors about missing tools.
const installHint = "install it with `apt-get install -y %s` (or run `make deps`)"

// ClickHouseOptions configures StartClickHouse. The zero value is ready to use.
type ClickHouseOptions struct {
	// KeepDir leaves the server's directory (config, data, logs) in place after Close, for a
	// post-mortem; its path is logged and returned by Dir.
	KeepDir bool
	// TempDir is where the server's directory is created; "" means os.TempDir().
	TempDir string
	// Logger receives the harness's own messages (not the server's log); nil discards them.
	Logger *slog.Logger
}

// ClickHouse is a ClickHouse server started by StartClickHouse, with its own config, data and
// logs in a temporary directory and its native and HTTP ports on 127.0.0.1.
type ClickHouse struct {
	service
	opts   ClickHouseOptions
	server []string // the server command, before its flags
	client []string // the client command, before its flags

	tcpPort  int // under mu
	httpPort int
}

// StartClickHouse starts a ClickHouse server and returns once it answers SELECT 1 on its native
// port. ctx bounds the startup only; the server runs until Stop or Close.
func StartClickHouse(ctx context.Context, opts ClickHouseOptions) (*ClickHouse, error) {
	server, client, err := findClickHouse()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(opts.TempDir, "slicemeter-clickhouse-")
	if err != nil {
		return nil, fmt.Errorf("creating ClickHouse's directory: %w", err)
	}
	c := &ClickHouse{service: service{name: "ClickHouse", log: orDefault(opts.Logger), dir: dir, keepDir: opts.KeepDir},
		opts: opts, server: server, client: client}
	c.logs = c.logFiles
	began := time.Now()
	// A port from FreePort can be taken before the server binds it; pick new ones then.
	for attempt := 1; ; attempt++ {
		if err = c.pickPorts(); err == nil {
			err = c.start(ctx)
		}
		if err == nil || attempt == 3 || !(portInUse(c.logFiles()) || errors.Is(err, errGiveUp)) {
			break
		}
		c.log.Info("ClickHouse lost a port race; retrying on new ports", "attempt", attempt)
		if err := truncateLogs(c.logFiles()); err != nil {
			break
		}
	}
	if err != nil {
		return nil, err // the directory stays, with the logs the error quotes from
	}
	c.log.Info("ClickHouse started", "addr", c.Addr(), "pid", c.Pid(), "dir", dir, "took", time.Since(began).Round(time.Millisecond))
	return c, nil
}

// findClickHouse locates the server and client: Debian's clickhouse-server/clickhouse-client
// (18.16), or upstream's single `clickhouse` binary with its server/client subcommands.
func findClickHouse() (server, client []string, err error) {
	if p, ok := lookFor([]string{"clickhouse-server"}, []string{"/usr/sbin/clickhouse-server", "/usr/bin/clickhouse-server"}); ok {
		server = []string{p}
	} else if p, ok := lookFor([]string{"clickhouse"}, nil); ok {
		server = []string{p, "server"}
	} else {
		return nil, nil, fmt.Errorf("no ClickHouse server found (clickhouse-server or clickhouse on PATH, /usr/sbin/clickhouse-server): "+installHint, "clickhouse-server clickhouse-client")
	}
	if p, ok := lookFor([]string{"clickhouse-client"}, nil); ok {
		client = []string{p}
	} else if p, ok := lookFor([]string{"clickhouse"}, nil); ok {
		client = []string{p, "client"}
	} else {
		return nil, nil, fmt.Errorf("no ClickHouse client found (clickhouse-client or clickhouse on PATH): "+installHint, "clickhouse-client")
	}
	return server, client, nil
}

func (c *ClickHouse) pickPorts() error {
	var err error
	if c.tcpPort, err = FreePort(); err != nil {
		return err
	}
	c.httpPort, err = FreePort()
	return err
}

// ClickHouse 18.16 wants the root element <yandex> (newer servers still accept it). Left out on
// purpose: interserver_http_port (replication only; its default 9009 could clash), the IPv6
// listen_host, and the system's /etc/clickhouse-server config, which would pull in port 9000.
var clickHouseConfig = template.Must(template.New("config.xml").Parse(`<?xml version="1.0"?>
<yandex>
    <logger>
        <level>information</level>
        <log>{{.Dir}}/log/clickhouse-server.log</log>
        <errorlog>{{.Dir}}/log/clickhouse-server.err.log</errorlog>
        <size>50M</size>
        <count>1</count>
    </logger>
    <listen_host>127.0.0.1</listen_host>
    <tcp_port>{{.TCPPort}}</tcp_port>
    <http_port>{{.HTTPPort}}</http_port>
    <path>{{.Dir}}/data/</path>
    <tmp_path>{{.Dir}}/tmp/</tmp_path>
    <user_files_path>{{.Dir}}/user_files/</user_files_path>
    <format_schema_path>{{.Dir}}/format_schemas/</format_schema_path>
    <users_config>{{.Dir}}/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <timezone>UTC</timezone>
    <max_connections>1024</max_connections>
    <max_concurrent_queries>100</max_concurrent_queries>
    <mark_cache_size>268435456</mark_cache_size>
    <uncompressed_cache_size>268435456</uncompressed_cache_size>
    <mlock_executable>false</mlock_executable>
</yandex>
`))

// The default user, passwordless and loopback-only; 18.16 refuses a user without a profile and
// a quota, and a quota without an interval.
const clickHouseUsers = `<?xml version="1.0"?>
<yandex>
    <profiles>
        <default>
            <max_memory_usage>4000000000</max_memory_usage>
            <use_uncompressed_cache>0</use_uncompressed_cache>
            <load_balancing>random</load_balancing>
        </default>
    </profiles>
    <users>
        <default>
            <password></password>
            <networks>
                <ip>127.0.0.1</ip>
                <ip>::1</ip>
            </networks>
            <profile>default</profile>
            <quota>default</quota>
        </default>
    </users>
    <quotas>
        <default>
            <interval>
                <duration>3600</duration>
                <queries>0</queries>
                <errors>0</errors>
                <result_rows>0</result_rows>
                <read_rows>0</read_rows>
                <execution_time>0</execution_time>
            </interval>
        </default>
    </quotas>
</yandex>
`

// The client's own config, so that ~/.clickhouse-client/config.xml (a user, a password, a
// host) cannot redirect the harness's queries.
const clickHouseClientConfig = `<?xml version="1.0"?>
<config></config>
`

func (c *ClickHouse) writeConfig() error {
	var cfg bytes.Buffer
	if err := clickHouseConfig.Execute(&cfg, struct {
		Dir               string
		TCPPort, HTTPPort int
	}{c.dir, c.tcpPort, c.httpPort}); err != nil {
		return fmt.Errorf("rendering ClickHouse's config: %w", err)
	}
	for name, text := range map[string][]byte{
		"config.xml":        cfg.Bytes(),
		"users.xml":         []byte(clickHouseUsers),
		"client-config.xml": []byte(clickHouseClientConfig),
	} {
		if err := os.WriteFile(filepath.Join(c.dir, name), text, 0o644); err != nil {
			return fmt.Errorf("writing ClickHouse's %s: %w", name, err)
		}
	}
	if err := os.MkdirAll(filepath.Join(c.dir, "log"), 0o755); err != nil {
		return fmt.Errorf("creating ClickHouse's log directory: %w", err)
	}
	return nil
}

func (c *ClickHouse) logFiles() []string {
	return []string{
		filepath.Join(c.dir, "log", "clickhouse-server.err.log"),
		filepath.Join(c.dir, "log", "stdout.log"),
	}
}

// start writes the config for the current ports, starts the server and waits until it answers.
func (c *ClickHouse) start(ctx context.Context) error {
	if err := c.writeConfig(); err != nil {
		return err
	}
	argv := append(append([]string{}, c.server...), "--config-file="+filepath.Join(c.dir, "config.xml"))
	p, err := startProcess("clickhouse-server", c.dir, filepath.Join(c.dir, "log", "stdout.log"), argv...)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, clickHouseStartTimeout)
	defer cancel()
	addr := c.addr()
	err = p.waitReady(ctx, 50*time.Millisecond, c.logFiles(), func(ctx context.Context) error {
		if err := dialable(ctx, addr); err != nil {
			return err
		}
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		// The data path proves this is the child, not a server that won a race for the port.
		out, err := c.query(qctx, c.tcpPort, "SELECT data_path FROM system.databases WHERE name = 'system'")
		if err != nil {
			return err
		}
		if !strings.HasPrefix(strings.TrimSpace(out), filepath.Join(c.dir, "data")) {
			return fmt.Errorf("%w: %s is another server (system data in %q)", errGiveUp, addr, strings.TrimSpace(out))
		}
		return nil
	})
	if err != nil {
		if terr := p.terminate(c.log, stopGrace); terr != nil {
			c.log.Debug("stopping the ClickHouse server that failed to start", "err", terr)
		}
		return fmt.Errorf("starting ClickHouse on %s (dir %s): %w", addr, c.dir, err)
	}
	c.proc = p
	return nil
}

func (c *ClickHouse) addr() string { return "127.0.0.1:" + strconv.Itoa(c.tcpPort) }

// Addr is the server's native-protocol address, "127.0.0.1:PORT".
func (c *ClickHouse) Addr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addr()
}

// HTTPAddr is the server's HTTP-interface address, "127.0.0.1:PORT": for a test of what a
// native-protocol client meets there.
func (c *ClickHouse) HTTPAddr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return "127.0.0.1:" + strconv.Itoa(c.httpPort)
}

// DSN is a clickhouse-go DSN for database on this server (native protocol, user default, no
// password). The database must exist; see CreateDatabase.
func (c *ClickHouse) DSN(database string) string {
	return "clickhouse://" + c.Addr() + "/" + database
}

// Dir is the server's directory: config.xml, data/, log/.
func (c *ClickHouse) Dir() string { return c.dir }

// Query runs one statement with the clickhouse client binary and returns its output
// (TabSeparated). It is meant for set-up and checks, not for data paths.
func (c *ClickHouse) Query(ctx context.Context, query string) (string, error) {
	c.mu.Lock()
	port := c.tcpPort
	c.mu.Unlock()
	return c.query(ctx, port, query)
}

func (c *ClickHouse) query(ctx context.Context, port int, query string) (string, error) {
	argv := append(append([]string{}, c.client...),
		"--config-file="+filepath.Join(c.dir, "client-config.xml"),
		"--host=127.0.0.1", "--port="+strconv.Itoa(port), "--user=default",
		"--query="+query)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("clickhouse client on port %d, query %q: %w: %s", port, query, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// CreateDatabase creates database name if it does not exist.
func (c *ClickHouse) CreateDatabase(ctx context.Context, name string) error {
	if name == "" {
		return errors.New("creating a ClickHouse database: empty name")
	}
	if _, err := c.Query(ctx, "CREATE DATABASE IF NOT EXISTS "+quoteIdent(name)); err != nil {
		return fmt.Errorf("creating ClickHouse database %q: %w", name, err)
	}
	return nil
}

// quoteIdent back-quotes a ClickHouse identifier.
func quoteIdent(s string) string {
	r := strings.NewReplacer(`\`, `\\`, "`", "\\`")
	return "`" + r.Replace(s) + "`"
}

// Restart stops the server if it runs and starts it again on the same ports with the same data.
func (c *ClickHouse) Restart(ctx context.Context) error {
	return c.restart(ctx, c.start, "addr", c.addr())
}

// truncateLogs empties log files so that a retry's failure is not blamed on an earlier attempt.
func truncateLogs(paths []string) error {
	for _, p := range paths {
		if err := os.Truncate(p, 0); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("truncating %s: %w", p, err)
		}
	}
	return nil
}
