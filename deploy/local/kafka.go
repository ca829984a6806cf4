package local

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
)

// kafkaStartTimeout bounds the wait for a started broker to answer metadata requests.
const kafkaStartTimeout = 90 * time.Second

// KafkaOptions configures StartKafka. The zero value is ready to use.
type KafkaOptions struct {
	// KeepDir leaves the broker's directory (config, data, logs) in place after Close.
	KeepDir bool
	// TempDir is where the broker's directory is created; "" means os.TempDir().
	TempDir string
	// Logger receives the harness's own messages (not the broker's log); nil discards them.
	Logger *slog.Logger
	// Properties are added to server.properties, replacing the harness's value of the same key.
	// The listener, quorum and log.dirs keys belong to the harness: leave them alone.
	Properties map[string]string
	// SASLSSL, if set, adds a SASL_SSL listener for clients beside the PLAINTEXT one (which the
	// harness keeps for its own readiness checks).
	SASLSSL *KafkaSASLSSL
}

// KafkaSASLSSL is a SASL_SSL listener: TLS with the broker's key and certificate, then SASL
// PLAIN or SCRAM-SHA-256/512 with the users given.
type KafkaSASLSSL struct {
	// KeystoreFile is a PEM file with the broker's unencrypted PKCS #8 private key and its
	// certificate chain (Kafka's ssl.keystore.type=PEM).
	KeystoreFile string
	// ClientCAFile, if set, is a PEM file of the CA certificates client certificates must chain
	// to: clients without one are refused (ssl.client.auth=required).
	ClientCAFile string
	// Plain maps PLAIN user names to passwords (in the listener's JAAS configuration).
	Plain map[string]string
	// SCRAM are the SCRAM credentials written into the cluster's bootstrap metadata by
	// `kafka-storage format --add-scram`, each as that flag takes it:
	// "SCRAM-SHA-256=[name=alice,password=secret]".
	SCRAM []string
}

// Kafka is a single-node Apache Kafka broker in KRaft mode (broker and controller in one JVM),
// started by StartKafka, with its config, data and logs in a temporary directory.
type Kafka struct {
	service
	opts KafkaOptions
	java string
	libs string

	port           int    // PLAINTEXT listener, for clients (under mu)
	saslPort       int    // SASL_SSL listener, with KafkaOptions.SASLSSL
	controllerPort int    // CONTROLLER listener, the KRaft quorum
	clusterID      string // set by format
}

// StartKafka starts a broker and returns once it answers metadata requests. The first call on a
// machine fetches Kafka's jars with Maven (see KafkaLibs). ctx bounds the startup only; the
// broker runs until Stop or Close.
func StartKafka(ctx context.Context, opts KafkaOptions) (*Kafka, error) {
	log := orDefault(opts.Logger)
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("java is missing (Kafka runs on Java 17+): "+installHint, "openjdk-17-jre-headless maven")
	}
	libs, err := KafkaLibs(ctx, log)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(opts.TempDir, "slicemeter-kafka-")
	if err != nil {
		return nil, fmt.Errorf("creating Kafka's directory: %w", err)
	}
	k := &Kafka{service: service{name: "Kafka", log: log, dir: dir, keepDir: opts.KeepDir}, opts: opts, java: java, libs: libs}
	k.logs = k.logFiles
	began := time.Now()
	// A port from FreePort can be taken before the broker binds it; pick new ones then.
	for attempt := 1; ; attempt++ {
		err = k.create(ctx)
		if err == nil || attempt == 3 || !(portInUse(k.logFiles()) || errors.Is(err, errGiveUp)) {
			break
		}
		log.Info("Kafka lost a port race; retrying on new ports", "attempt", attempt)
		if err := truncateLogs(k.logFiles()); err != nil {
			break
		}
	}
	if err != nil {
		return nil, err // the directory stays, with the logs the error quotes from
	}
	log.Info("Kafka started", "brokers", k.Brokers(), "pid", k.Pid(), "dir", dir, "took", time.Since(began).Round(time.Millisecond))
	return k, nil
}

// create picks ports, writes the config, formats empty storage and starts the broker.
func (k *Kafka) create(ctx context.Context) error {
	var err error
	if k.port, err = FreePort(); err != nil {
		return err
	}
	if k.controllerPort, err = FreePort(); err != nil {
		return err
	}
	if k.opts.SASLSSL != nil {
		if k.saslPort, err = FreePort(); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(k.dataDir()); err != nil {
		return fmt.Errorf("emptying Kafka's data directory: %w", err)
	}
	if err := k.writeConfig(); err != nil {
		return err
	}
	began := time.Now()
	if err := k.format(ctx); err != nil {
		return err
	}
	k.log.Debug("Kafka storage formatted", "took", time.Since(began).Round(time.Millisecond))
	return k.start(ctx)
}

func (k *Kafka) dataDir() string    { return filepath.Join(k.dir, "data") }
func (k *Kafka) properties() string { return filepath.Join(k.dir, "server.properties") }
func (k *Kafka) logFiles() []string {
	return []string{filepath.Join(k.dir, "log", "server.log"), filepath.Join(k.dir, "log", "stdout.log")}
}

// serverProperties is the broker's configuration for a single node: every internal topic has
// one replica, and new consumer groups start without the 3 s rebalance delay.
func (k *Kafka) serverProperties() map[string]string {
	p := map[string]string{
		"process.roles":                                    "broker,controller",
		"node.id":                                          "1",
		"controller.quorum.voters":                         "1@127.0.0.1:" + strconv.Itoa(k.controllerPort),
		"listeners":                                        fmt.Sprintf("PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", k.port, k.controllerPort),
		"advertised.listeners":                             "PLAINTEXT://127.0.0.1:" + strconv.Itoa(k.port),
		"listener.security.protocol.map":                   "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"controller.listener.names":                        "CONTROLLER",
		"inter.broker.listener.name":                       "PLAINTEXT",
		"log.dirs":                                         k.dataDir(),
		"num.partitions":                                   "1",
		"auto.create.topics.enable":                        "true",
		"offsets.topic.replication.factor":                 "1",
		"offsets.topic.num.partitions":                     "1", // 50 by default: slow first group join
		"transaction.state.log.replication.factor":         "1",
		"transaction.state.log.min.isr":                    "1",
		"transaction.state.log.num.partitions":             "1",
		"share.coordinator.state.topic.replication.factor": "1",
		"share.coordinator.state.topic.min.isr":            "1",
		"group.initial.rebalance.delay.ms":                 "0",
	}
	if s := k.opts.SASLSSL; s != nil {
		p["listeners"] += fmt.Sprintf(",SASL_SSL://127.0.0.1:%d", k.saslPort)
		p["advertised.listeners"] += fmt.Sprintf(",SASL_SSL://127.0.0.1:%d", k.saslPort)
		p["listener.security.protocol.map"] += ",SASL_SSL:SASL_SSL"
		p["listener.name.sasl_ssl.ssl.keystore.type"] = "PEM"
		p["listener.name.sasl_ssl.ssl.keystore.location"] = s.KeystoreFile
		p["sasl.enabled.mechanisms"] = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
		if s.ClientCAFile != "" {
			p["listener.name.sasl_ssl.ssl.client.auth"] = "required"
			p["listener.name.sasl_ssl.ssl.truststore.type"] = "PEM"
			p["listener.name.sasl_ssl.ssl.truststore.location"] = s.ClientCAFile
		}
		var jaas strings.Builder
		jaas.WriteString("org.apache.kafka.common.security.plain.PlainLoginModule required")
		for _, u := range slices.Sorted(maps.Keys(s.Plain)) {
			fmt.Fprintf(&jaas, " user_%s=%q", u, s.Plain[u])
		}
		jaas.WriteString(";")
		p["listener.name.sasl_ssl.plain.sasl.jaas.config"] = jaas.String()
		for _, m := range []string{"scram-sha-256", "scram-sha-512"} {
			p["listener.name.sasl_ssl."+m+".sasl.jaas.config"] = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
		}
	}
	maps.Copy(p, k.opts.Properties)
	return p
}

// kafkaLog4j sends the broker's log to a file in its directory and nothing to stdout.
const kafkaLog4j = `<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders>
    <File name="file" fileName="${sys:slicemeter.kafka.log}">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
    </File>
  </Appenders>
  <Loggers>
    <Root level="INFO"><AppenderRef ref="file"/></Root>
    <Logger name="org.apache.kafka.clients" level="WARN"/>
    <Logger name="org.apache.kafka.common.utils.AppInfoParser" level="WARN"/>
    <Logger name="kafka.request.logger" level="WARN"/>
    <Logger name="state.change.logger" level="WARN"/>
    <Logger name="kafka.log.LogCleaner" level="WARN"/>
  </Loggers>
</Configuration>
`

func (k *Kafka) writeConfig() error {
	props := k.serverProperties()
	var b strings.Builder
	b.WriteString("# Written by slicemeter's deploy/local harness.\n")
	for _, key := range slices.Sorted(maps.Keys(props)) {
		fmt.Fprintf(&b, "%s=%s\n", key, props[key])
	}
	if err := os.WriteFile(k.properties(), []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("writing Kafka's server.properties: %w", err)
	}
	if err := os.WriteFile(filepath.Join(k.dir, "log4j2.xml"), []byte(kafkaLog4j), 0o644); err != nil {
		return fmt.Errorf("writing Kafka's log4j2.xml: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(k.dir, "log"), 0o755); err != nil {
		return fmt.Errorf("creating Kafka's log directory: %w", err)
	}
	return nil
}

// jvm returns the java command line for class with args: a small heap and a serial collector
// keep a test broker light; C1 only (TieredStopAtLevel=1) starts it 1.5-2 s sooner on 2 CPUs.
func (k *Kafka) jvm(heap []string, logFile, class string, args ...string) []string {
	argv := []string{k.java}
	argv = append(argv, heap...)
	argv = append(argv,
		"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:+ExitOnOutOfMemoryError",
		"-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile="+filepath.Join(k.dir, "log4j2.xml"),
		"-Dslicemeter.kafka.log="+logFile,
		"-cp", filepath.Join(k.libs, "*"), // expanded by java, not a shell
		class)
	return append(argv, args...)
}

// format writes meta.properties and the bootstrap metadata into empty storage (the
// kafka-storage.sh format step); the class is kafka.tools.StorageTool in kafka_2.13.
func (k *Kafka) format(ctx context.Context) error {
	id, err := clusterID()
	if err != nil {
		return err
	}
	k.clusterID = id
	argv := k.jvm([]string{"-Xmx256m"}, filepath.Join(k.dir, "log", "format.log"),
		"kafka.tools.StorageTool", "format", "--cluster-id", id, "--config", k.properties())
	if s := k.opts.SASLSSL; s != nil {
		for _, cred := range s.SCRAM {
			argv = append(argv, "--add-scram", cred)
		}
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = k.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		shown := slices.Clone(argv)
		for i := range shown {
			if i > 0 && shown[i-1] == "--add-scram" {
				shown[i] = "<credentials>" // they hold passwords
			}
		}
		return fmt.Errorf("formatting Kafka's storage (%s): %w\n%s", strings.Join(shown, " "), err, lastLines(string(out), 30))
	}
	return nil
}

// clusterID returns a random Kafka cluster id: 16 bytes, URL-safe base64 without padding.
// Like Kafka's Uuid.randomUuid it avoids a leading '-', which command lines take for a flag.
func clusterID() (string, error) {
	for {
		b := make([]byte, 16)
		if _, err := rand.Read(b); err != nil {
			return "", fmt.Errorf("generating a Kafka cluster id: %w", err)
		}
		if id := base64.RawURLEncoding.EncodeToString(b); id[0] != '-' {
			return id, nil
		}
	}
}

// start starts the broker on the configured ports and data and waits until it is ready.
func (k *Kafka) start(ctx context.Context) error {
	argv := k.jvm([]string{"-Xms256m", "-Xmx512m"}, k.logFiles()[0], "kafka.Kafka", k.properties())
	p, err := startProcess("kafka", k.dir, k.logFiles()[1], argv...)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, kafkaStartTimeout)
	defer cancel()
	addr := k.brokers()
	err = p.waitReady(ctx, 100*time.Millisecond, k.logFiles(), func(ctx context.Context) error {
		return kafkaReady(ctx, addr, k.clusterID)
	})
	if err != nil {
		if terr := p.terminate(k.log, stopGrace); terr != nil {
			k.log.Debug("stopping the Kafka broker that failed to start", "err", terr)
		}
		return fmt.Errorf("starting Kafka on %s (dir %s): %w", addr, k.dir, err)
	}
	k.proc = p
	return nil
}

// kafkaReady asks the broker for cluster metadata, which it answers only once it has joined its
// own KRaft quorum and registered itself; the cluster id proves it is this broker and not one
// that won a race for the port. Then it asks for a group coordinator, which creates and loads
// __consumer_offsets now: a client that finds no coordinator backs off (kafka-go's group reader
// for 5 s), which would slow every test's first group join.
func kafkaReady(ctx context.Context, addr, clusterID string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	transport := &kafka.Transport{}
	defer transport.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(addr), Transport: transport}
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{}})
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	if md.ClusterID != clusterID {
		return fmt.Errorf("%w: %s answers for cluster %q, not %q", errGiveUp, addr, md.ClusterID, clusterID)
	}
	if len(md.Brokers) == 0 {
		return errors.New("metadata lists no brokers yet")
	}
	fc, err := client.FindCoordinator(ctx, &kafka.FindCoordinatorRequest{
		Key: "slicemeter-readiness", KeyType: kafka.CoordinatorKeyTypeConsumer,
	})
	if err != nil {
		return fmt.Errorf("group coordinator: %w", err)
	}
	if fc.Error != nil {
		return fmt.Errorf("group coordinator: %w", fc.Error)
	}
	return nil
}

func (k *Kafka) brokers() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(k.port)) }

// Brokers is the bootstrap address for clients, "127.0.0.1:PORT".
func (k *Kafka) Brokers() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.brokers()
}

// SASLSSLBrokers is the bootstrap address of the SASL_SSL listener, "127.0.0.1:PORT"; "" without
// KafkaOptions.SASLSSL.
func (k *Kafka) SASLSSLBrokers() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.opts.SASLSSL == nil {
		return ""
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(k.saslPort))
}

// Dir is the broker's directory: server.properties, data/, log/.
func (k *Kafka) Dir() string { return k.dir }

// Restart stops the broker (a controlled shutdown) if it runs and starts it again with the same
// data and port, so the same topics, offsets and groups come back. Clients see an outage in
// between, as with a real broker restart.
func (k *Kafka) Restart(ctx context.Context) error {
	return k.restart(ctx, k.start, "brokers", k.brokers())
}
