//go:build !exporter_only

package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strings"

	"github.com/alecthomas/kingpin/v2"

	"github.com/slicemeter/slicemeter/attribution/request"
	"github.com/slicemeter/slicemeter/deploy/demo"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
)

// demoCmd is `slicemeter demo`: its flags fill a demo.Config.
type demoCmd struct {
	cfg     demo.Config
	brokers string
}

// demoTargets are the demo's flags that say where it writes, and how it connects there: only the
// command line sets them. An operator's SLICEMETER_CLICKHOUSE_DSN or SLICEMETER_KAFKA_BROKERS,
// exported for the real services, must not make a demo write simulated tenants into production.
var demoTargets = []string{"clickhouse.dsn", "kafka.brokers", "kafka.tls.enable", "kafka.tls.ca-file", "kafka.tls.cert-file",
	"kafka.tls.key-file", "kafka.tls.server-name", "kafka.tls.insecure-skip-verify", "kafka.sasl.mechanism", "kafka.sasl.username",
	"kafka.sasl.password-file"}

func newDemoCmd(app *kingpin.Application, stdout io.Writer) *demoCmd {
	c := app.Command("demo", "Run the whole pipeline on a simulated fleet: exporter → Kafka → collector → ClickHouse → attribution → report.")
	d := &demoCmd{cfg: demo.Config{Report: stdout}}
	cfg := &d.cfg
	c.Flag("scenario", "Scenario file (the simulated fleet, its tenants and prices).").Required().StringVar(&cfg.ScenarioPath)
	c.Flag("fast", "Run the simulated clock as fast as the pipeline allows; end when everything is attributed.").BoolVar(&cfg.Fast)
	c.Flag("report", "Write the report to this file instead of stdout.").StringVar(&cfg.ReportPath)
	c.Flag("format", "Report format.").Default(request.CSV).EnumVar(&cfg.Format, request.ReportFormats()...)
	c.Flag("kafka.brokers", "Kafka brokers; empty runs an embedded broker (kfake) in the process. Only from the command line: SLICEMETER_KAFKA_BROKERS and the other Kafka variables are ignored.").StringVar(&d.brokers)
	kafkaSecurityFlags(c, &cfg.Kafka)
	c.Flag("clickhouse.dsn", "ClickHouse DSN; empty starts a ClickHouse server from PATH in a temporary directory. Only from the command line: SLICEMETER_CLICKHOUSE_DSN is ignored.").StringVar(&cfg.DSN)
	c.Flag("kafka.partitions", "Partitions of the topics when they have to be created.").Default("4").IntVar(&cfg.Partitions)
	c.Flag("kafka.flush-interval", "Sampled time per SampleBatch (default: 1s, 10s with --fast).").DurationVar(&cfg.FlushInterval)
	c.Flag("attribution.store-minutes", "With --clickhouse.dsn: store the attribution minutes of the scenario's window, as the attribution service does, so that report --from-minutes, fleet and statement work on that database afterwards; --no-attribution.store-minutes leaves them to an attribution service started on it later.").
		Default("true").BoolVar(&cfg.StoreMinutes)
	c.Flag("sim.start", "Move the scenario to start at this time (RFC 3339, or now): a live demo then has wall-clock timestamps that Prometheus and the attribution service's trailing window see.").StringVar(&cfg.SimStart)
	cfg.Web = webFlags(c, ":9835")
	for _, name := range demoTargets {
		c.GetFlag(name).NoEnvar()
	}
	return d
}

func (d *demoCmd) run(ctx context.Context, logger *slog.Logger) error {
	for _, name := range demoTargets {
		if v := envarOf(name); os.Getenv(v) != "" {
			logger.Warn("the demo ignores "+v+": it writes only into the ClickHouse and Kafka it starts, or those its command line names",
				"flag", "--"+name)
		}
	}
	cfg := d.cfg
	cfg.Brokers = kafkaconn.ParseBrokers(d.brokers)
	return demo.Run(ctx, cfg, logger)
}

// envarOf is the environment variable that sets a flag (the application's DefaultEnvars: its
// name in upper case after SLICEMETER_, other characters than letters and digits as _).
func envarOf(flag string) string {
	return "SLICEMETER_" + strings.ToUpper(nonEnvar.ReplaceAllString(flag, "_"))
}

var nonEnvar = regexp.MustCompile(`[^a-zA-Z0-9_]+`)
