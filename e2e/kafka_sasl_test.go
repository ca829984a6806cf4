package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/attribution/allocations"
	"github.com/slicemeter/slicemeter/deploy/local/localtest"
	"github.com/slicemeter/slicemeter/e2e/apptest"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
)

// saslScenario is spoolScenario cut to 10 s: one node, MIG instances and a whole GPU.
var saslScenario = strings.NewReplacer("duration: 70s", "duration: 10s", "end: 70s", "end: 10s", "end: 60s", "end: 8s").Replace(spoolScenario)

// The pipeline over a SASL_SSL listener of the real broker, with certificates made by the test
// (the broker requires a client certificate) and SCRAM credentials made by kafka-storage
// format: the demo and the scheduler (this test) authenticate with SCRAM-SHA-256, the collector
// with SCRAM-SHA-512, the exporter with PLAIN, and ClickHouse stores every sample and allocation. Then a collector and an exporter with a
// wrong password stop at start with an error naming the broker and the mechanism, and no
// output shows a password.
func TestKafkaSASL(t *testing.T) {
	t.Parallel()
	sk := localtest.NewSecureKafka(t)
	dsn := localtest.Database(t, localtest.DatabaseOptions{}).DSN
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	brokers := sk.SASLSSLBrokers()
	secure := func(u localtest.KafkaUser, passwordFile string) []string {
		return []string{"--kafka.brokers", brokers, "--kafka.tls.ca-file", sk.TLS.CAFile, "--kafka.tls.cert-file", sk.TLS.ClientCert,
			"--kafka.tls.key-file", sk.TLS.ClientKey, "--kafka.sasl.mechanism", u.Mechanism,
			"--kafka.sasl.username", u.Name, "--kafka.sasl.password-file", passwordFile}
	}
	for _, u := range sk.Users {
		apptest.Secret(t, u.Password)
	}
	if b, err := os.ReadFile(sk.WrongPasswordFile); err == nil {
		apptest.Secret(t, strings.TrimSpace(string(b)))
	}
	noPassword := func(what, out string) {
		t.Helper()
		for _, u := range sk.Users {
			if strings.Contains(out, u.Password) {
				t.Errorf("%s shows the password of %s", what, u.Name)
			}
		}
		if b, err := os.ReadFile(sk.WrongPasswordFile); err == nil && strings.Contains(out, strings.TrimSpace(string(b))) {
			t.Errorf("%s shows the wrong password", what)
		}
	}

	file := writeFile(t, "sasl.yaml", saslScenario)
	sc := loadScenario(t, file)
	scram256 := sk.User(kafkaconn.MechanismSCRAMSHA256)

	// The demo first, over SCRAM-SHA-256 into a database of its own. The pipeline below
	// reads its samples again too: the same scenario, so the same distinct samples.
	demo := apptest.Demo(t, ctx, append([]string{"--scenario", file, "--fast", "--clickhouse.dsn", localtest.Database(t, localtest.DatabaseOptions{}).DSN},
		secure(scram256, scram256.PasswordFile)...)...)
	noPassword("the demo's output", demo.Stdout+demo.Stderr)
	scram512 := sk.User(kafkaconn.MechanismSCRAMSHA512)
	collector := apptest.StartCollector(t, ctx, append(secure(scram512, scram512.PasswordFile), "--clickhouse.dsn", dsn,
		"--kafka.group", "e2e-sasl", "--kafka.partitions", "2", "--collector.flush-interval", "200ms")...)

	sec, err := kafkaconn.SecurityConfig{CAFile: sk.TLS.CAFile, CertFile: sk.TLS.ClientCert, KeyFile: sk.TLS.ClientKey, Mechanism: scram256.Mechanism, Username: scram256.Name,
		PasswordFile: scram256.PasswordFile}.Load()
	if err != nil {
		t.Fatal(err)
	}
	events := sc.AllocationEvents()
	if err := allocations.Announce(ctx, kafkaconn.Cluster{Brokers: []string{brokers}, Security: sec}, events, nil); err != nil {
		t.Fatal(err)
	}
	plain := sk.User(kafkaconn.MechanismPlain)
	exp := apptest.MustRun(t, ctx, append([]string{"exporter", "--source", "sim", "--scenario", file, "--sim.fast",
		"--no-sim.allocations", "--kafka.flush-interval", "1s", "--kafka.partitions", "2", "--web.listen-address", "127.0.0.1:0"}, secure(plain, plain.PasswordFile)...)...)
	noPassword("the exporter's output", exp.Stdout+exp.Stderr)
	conn := connect(t, ctx, dsn)
	waitSamplesAndAllocations(t, ctx, conn, simulatedCount(t, sc), uint64(len(events)), 2*time.Minute, collector)
	if err := collector.Stop(); err != nil {
		t.Errorf("collector did not stop cleanly: %v\n%s", err, collector.LogTail(20))
	}
	noPassword("the collector's log", collector.Log())
	// The demo's report and the one from what this collector stored agree.
	r := apptest.Report(t, ctx, dsn, scenarioWindow(file, sc)...)
	got := parseCSV(t, r.Stdout)
	if len(got) < 2 {
		t.Fatalf("the report has no rows:\n%s", r.Stdout)
	}
	if d := compareReports(parseCSV(t, demo.Stdout), got, sc.Interval.Seconds()); len(d) > 0 {
		t.Errorf("the demo's report differs from the pipeline's:\n  %s", strings.Join(d, "\n  "))
	}

	// A wrong password: both stop at start, naming the broker and the mechanism. The context
	// only keeps a hung process from hanging the test; the start-up check has its own bound.
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"collector", append([]string{"collector"}, append(secure(scram512, sk.WrongPasswordFile), "--clickhouse.dsn", dsn)...)},
		{"exporter", append([]string{"exporter"}, append(secure(plain, sk.WrongPasswordFile), "--source", "sim", "--scenario", file,
			"--sim.fast", "--web.listen-address", "127.0.0.1:0")...)},
	} {
		t.Run("wrong password/"+tc.name, func(t *testing.T) {
			runCtx, cancel := context.WithTimeout(ctx, kafkaconn.CheckTimeout+kafkaconn.DefaultTimeout+30*time.Second)
			defer cancel()
			r := apptest.Run(t, runCtx, tc.args...)
			if runCtx.Err() != nil {
				t.Fatalf("%s with a wrong password did not stop by itself\n%s", tc.name, apptest.Tail(r.Stderr, 20))
			}
			mech := strings.ToUpper(secureMechanism(tc.args))
			if r.Code == 0 || !strings.Contains(r.Stderr, brokers) || !strings.Contains(r.Stderr, mech) ||
				!strings.Contains(r.Stderr, "refused the credentials") {
				t.Errorf("%s with a wrong password: exit %d; want an error naming %s and %s\n%s", tc.name, r.Code, brokers, mech, apptest.Tail(r.Stderr, 20))
			}
			t.Logf("exit %d in %s: %s", r.Code, r.Took.Round(time.Millisecond), apptest.Tail(r.Stderr, 1))
			noPassword(tc.name+"'s output", r.Stdout+r.Stderr)
		})
	}
}

// secureMechanism is the value of --kafka.sasl.mechanism in args.
func secureMechanism(args []string) string {
	for i, a := range args {
		if a == "--kafka.sasl.mechanism" && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}
