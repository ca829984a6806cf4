package local

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ZooKeeperVersion is the Apache ZooKeeper release the harness runs; it must match
// zookeeper/pom.xml. ClickHouse 18.16 has no ClickHouse Keeper: its Replicated tables and ON
// CLUSTER DDL need a real ZooKeeper.
const ZooKeeperVersion = "3.9.5"

// zooKeeperStartTimeout bounds the wait for a started server to answer on its client port.
const zooKeeperStartTimeout = 60 * time.Second

// zooKeeperPOM names the server's jars; embedded so that no working directory is assumed.
//
//go:embed zookeeper/pom.xml
var zooKeeperPOM []byte

// ZooKeeperOptions configures StartZooKeeper. The zero value is ready to use.
type ZooKeeperOptions struct {
	// KeepDir leaves the server's directory (config, data, logs) in place after Close.
	KeepDir bool
	// TempDir is where the server's directory is created; "" means os.TempDir().
	TempDir string
	// Logger receives the harness's own messages (not the server's log); nil discards them.
	Logger *slog.Logger
}

// ZooKeeper is a standalone Apache ZooKeeper server started by StartZooKeeper, with its config,
// data and logs in a temporary directory and its client port on 127.0.0.1. The admin server
// (an HTTP port, 8080 by default) is off.
type ZooKeeper struct {
	service
	opts ZooKeeperOptions
	java string
	libs string

	port int // under mu
}

// StartZooKeeper starts a standalone ZooKeeper and returns once it answers on its client port.
// The first call on a machine fetches ZooKeeper's jars with Maven (see ZooKeeperLibs). ctx bounds
// the startup only; the server runs until Stop or Close.
func StartZooKeeper(ctx context.Context, opts ZooKeeperOptions) (*ZooKeeper, error) {
	log := orDefault(opts.Logger)
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("java is missing (ZooKeeper runs on Java 17): "+installHint, "openjdk-17-jre-headless maven")
	}
	libs, err := ZooKeeperLibs(ctx, log)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(opts.TempDir, "slicemeter-zookeeper-")
	if err != nil {
		return nil, fmt.Errorf("creating ZooKeeper's directory: %w", err)
	}
	z := &ZooKeeper{service: service{name: "ZooKeeper", log: log, dir: dir, keepDir: opts.KeepDir}, opts: opts, java: java, libs: libs}
	z.logs = z.logFiles
	began := time.Now()
	// A port from FreePort can be taken before the server binds it; pick a new one then.
	for attempt := 1; ; attempt++ {
		if z.port, err = FreePort(); err == nil {
			err = z.start(ctx)
		}
		if err == nil || attempt == 3 || !(portInUse(z.logFiles()) || errors.Is(err, errGiveUp)) {
			break
		}
		log.Info("ZooKeeper lost a port race; retrying on a new port", "attempt", attempt)
		if err := truncateLogs(z.logFiles()); err != nil {
			break
		}
	}
	if err != nil {
		return nil, err // the directory stays, with the logs the error quotes from
	}
	log.Info("ZooKeeper started", "addr", z.Addr(), "pid", z.Pid(), "dir", dir, "took", time.Since(began).Round(time.Millisecond))
	return z, nil
}

func (z *ZooKeeper) dataDir() string { return filepath.Join(z.dir, "data") }
func (z *ZooKeeper) logFiles() []string {
	return []string{filepath.Join(z.dir, "log", "zookeeper.log"), filepath.Join(z.dir, "log", "stdout.log")}
}

// zooKeeperLog4j sends the server's log to a file in its directory and nothing to stdout.
const zooKeeperLog4j = `<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders>
    <File name="file" fileName="${sys:slicemeter.zookeeper.log}">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
    </File>
  </Appenders>
  <Loggers>
    <Root level="INFO"><AppenderRef ref="file"/></Root>
  </Loggers>
</Configuration>
`

// writeConfig writes zoo.cfg for the current port. tickTime 2 s allows sessions of 4-40 s, so
// ClickHouse's default 30 s session timeout is granted as asked. The four-letter word conf is
// whitelisted for the readiness check, which reads the data directory from it.
func (z *ZooKeeper) writeConfig() error {
	cfg := strings.Join([]string{
		"# Written by slicemeter's deploy/local harness.",
		"tickTime=2000",
		"dataDir=" + z.dataDir(),
		"clientPort=" + strconv.Itoa(z.port),
		"clientPortAddress=127.0.0.1",
		"maxClientCnxns=0",
		"admin.enableServer=false",
		"4lw.commands.whitelist=conf,ruok,srvr",
		"",
	}, "\n")
	if err := os.MkdirAll(z.dataDir(), 0o755); err != nil {
		return fmt.Errorf("creating ZooKeeper's data directory: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(z.dir, "log"), 0o755); err != nil {
		return fmt.Errorf("creating ZooKeeper's log directory: %w", err)
	}
	for name, text := range map[string]string{"zoo.cfg": cfg, "log4j2.xml": zooKeeperLog4j} {
		if err := os.WriteFile(filepath.Join(z.dir, name), []byte(text), 0o644); err != nil {
			return fmt.Errorf("writing ZooKeeper's %s: %w", name, err)
		}
	}
	return nil
}

// start writes the config, starts the server and waits until it is ready.
func (z *ZooKeeper) start(ctx context.Context) error {
	if err := z.writeConfig(); err != nil {
		return err
	}
	// A small heap and a serial collector keep a test server light; C1 only starts it sooner.
	argv := []string{z.java,
		"-Xms64m", "-Xmx256m",
		"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:+ExitOnOutOfMemoryError",
		"-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile=" + filepath.Join(z.dir, "log4j2.xml"),
		"-Dslicemeter.zookeeper.log=" + z.logFiles()[0],
		"-Dzookeeper.jmx.log4j.disable=true",
		"-cp", filepath.Join(z.libs, "*"), // expanded by java, not a shell
		"org.apache.zookeeper.server.ZooKeeperServerMain", filepath.Join(z.dir, "zoo.cfg"),
	}
	p, err := startProcess("zookeeper", z.dir, z.logFiles()[1], argv...)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, zooKeeperStartTimeout)
	defer cancel()
	addr := z.addr()
	err = p.waitReady(ctx, 100*time.Millisecond, z.logFiles(), func(ctx context.Context) error {
		// When startup fails (a missing class, a bad config) the main thread dies but the JVM
		// lives on in its other threads, answering "not currently serving requests" forever.
		if b, _ := os.ReadFile(z.logFiles()[0]); bytes.Contains(b, []byte("ERROR Thread Thread[main,")) {
			return fmt.Errorf("%w: ZooKeeper's main thread died", errGiveUp)
		}
		return zooKeeperReady(ctx, addr, z.dataDir())
	})
	if err != nil {
		if terr := p.terminate(z.log, stopGrace); terr != nil {
			z.log.Debug("stopping the ZooKeeper server that failed to start", "err", terr)
		}
		return fmt.Errorf("starting ZooKeeper on %s (dir %s): %w", addr, z.dir, err)
	}
	z.proc = p
	return nil
}

// zooKeeperReady sends the four-letter word conf: the server answers it once it serves clients,
// and the data directory in the answer proves it is the child, not a server that won a race for
// the port.
func zooKeeperReady(ctx context.Context, addr, dataDir string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	out, err := fourLetterWord(ctx, addr, "conf")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "dataDir="); ok {
			if !strings.HasPrefix(v, dataDir) {
				return fmt.Errorf("%w: %s is another ZooKeeper (dataDir %s)", errGiveUp, addr, v)
			}
			return nil
		}
	}
	// Before it serves clients the server answers "This ZooKeeper instance is not currently
	// serving requests".
	return fmt.Errorf("%s not serving yet: %q", addr, strings.TrimSpace(out))
}

// fourLetterWord sends a ZooKeeper four-letter command (conf, srvr, ...) and returns the answer;
// the server closes the connection after it.
func fourLetterWord(ctx context.Context, addr, word string) (string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if deadline, ok := ctx.Deadline(); ok {
		if err := conn.SetDeadline(deadline); err != nil {
			return "", fmt.Errorf("setting a deadline on %s: %w", addr, err)
		}
	}
	if _, err := conn.Write([]byte(word)); err != nil {
		return "", fmt.Errorf("sending %s to %s: %w", word, addr, err)
	}
	out, err := io.ReadAll(conn)
	if err != nil {
		return "", fmt.Errorf("reading the answer to %s from %s: %w", word, addr, err)
	}
	return string(out), nil
}

func (z *ZooKeeper) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(z.port)) }

// Addr is the client address, "127.0.0.1:PORT".
func (z *ZooKeeper) Addr() string {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.addr()
}

// Port is the client port on 127.0.0.1.
func (z *ZooKeeper) Port() int {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.port
}

// ClickHouseConfig is a ClickHouse config.d file (see ClickHouse.AddConfig) that points a
// server at this ZooKeeper.
func (z *ZooKeeper) ClickHouseConfig() string {
	return `<?xml version="1.0"?>
<yandex>
    <zookeeper>
        <node><host>127.0.0.1</host><port>` + strconv.Itoa(z.Port()) + `</port></node>
    </zookeeper>
</yandex>
`
}

// Dir is the server's directory: zoo.cfg, data/, log/.
func (z *ZooKeeper) Dir() string { return z.dir }

// ZooKeeperLibs returns the directory of the server's jars, downloading them from Maven Central
// with mvn the first time, into CacheDir()/zookeeper-VERSION/libs. It follows KafkaLibs: the
// marker holds the pom's SHA-256 (install-deps.sh writes the same), and concurrent callers wait
// for one download.
func ZooKeeperLibs(ctx context.Context, log *slog.Logger) (string, error) {
	return mavenLibs(ctx, log, "ZooKeeper", "zookeeper-"+ZooKeeperVersion, zooKeeperPOM)
}
