package main

import (
	"context"
	"io"
	"log/slog"

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

func newDemoCmd(app *kingpin.Application, stdout io.Writer) *demoCmd {
	c := app.Command("demo", "Run the whole pipeline on a simulated fleet: exporter → Kafka → collector → ClickHouse → attribution → report.")
	d := &demoCmd{cfg: demo.Config{Report: stdout}}
	cfg := &d.cfg
	c.Flag("scenario", "Scenario file (the simulated fleet, its tenants and prices).").Required().StringVar(&cfg.ScenarioPath)
	c.Flag("fast", "Run the simulated clock as fast as the pipeline allows; end when everything is attributed.").BoolVar(&cfg.Fast)
	c.Flag("report", "Write the report to this file instead of stdout.").StringVar(&cfg.ReportPath)
	c.Flag("format", "Report format.").Default(request.CSV).EnumVar(&cfg.Format, request.ReportFormats()...)
	c.Flag("kafka.brokers", "Kafka brokers; empty runs an embedded broker (kfake) in the process.").StringVar(&d.brokers)
	kafkaSecurityFlags(c, &cfg.Kafka)
	c.Flag("clickhouse.dsn", "ClickHouse DSN; empty starts a ClickHouse server from PATH in a temporary directory.").StringVar(&cfg.DSN)
	c.Flag("kafka.partitions", "Partitions of the topics when they have to be created.").Default("4").IntVar(&cfg.Partitions)
	c.Flag("kafka.flush-interval", "Sampled time per SampleBatch (default: 1s, 10s with --fast).").DurationVar(&cfg.FlushInterval)
	c.Flag("sim.start", "Move the scenario to start at this time (RFC 3339, or now): a live demo then has wall-clock timestamps that Prometheus and the attribution service's trailing window see.").StringVar(&cfg.SimStart)
	cfg.Web = webFlags(c, ":9835")
	return d
}

func (d *demoCmd) run(ctx context.Context, logger *slog.Logger) error {
	cfg := d.cfg
	cfg.Brokers = kafkaconn.ParseBrokers(d.brokers)
	return demo.Run(ctx, cfg, logger)
}
