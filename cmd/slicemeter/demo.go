package main

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/slicemeter/slicemeter/internal/webserver"

	"github.com/alecthomas/kingpin/v2"

	"github.com/slicemeter/slicemeter/deploy/demo"
	"github.com/slicemeter/slicemeter/internal/kafkaconn"
)

// demoCmd is `slicemeter demo`: its flags, for deploy/demo.
type demoCmd struct {
	stdout     io.Writer
	scenario   *string
	fast       *bool
	reportPath *string
	format     *string
	brokers    *string
	dsn        *string
	partitions *int
	flush      *time.Duration
	simStart   *string
	web        *webserver.Flags
}

func newDemoCmd(app *kingpin.Application, stdout io.Writer) *demoCmd {
	c := app.Command("demo", "Run the whole pipeline on a simulated fleet: exporter → Kafka → collector → ClickHouse → attribution → report.")
	return &demoCmd{
		stdout:     stdout,
		scenario:   c.Flag("scenario", "Scenario file (the simulated fleet, its tenants and prices).").Required().String(),
		fast:       c.Flag("fast", "Run the simulated clock as fast as the pipeline allows; end when everything is attributed.").Bool(),
		reportPath: c.Flag("report", "Write the report to this file instead of stdout.").String(),
		format:     c.Flag("format", "Report format.").Default("csv").Enum("csv", "json"),
		brokers:    c.Flag("kafka.brokers", "Kafka brokers; empty runs an embedded broker (kfake) in the process.").String(),
		dsn:        c.Flag("clickhouse.dsn", "ClickHouse DSN; empty starts a ClickHouse server from PATH in a temporary directory.").String(),
		partitions: c.Flag("kafka.partitions", "Partitions of the topics when they have to be created.").Default("4").Int(),
		flush:      c.Flag("kafka.flush-interval", "Sampled time per SampleBatch (default: 1s, 10s with --fast).").Duration(),
		simStart:   c.Flag("sim.start", "Move the scenario to start at this time (RFC 3339, or now): a live demo then has wall-clock timestamps that Prometheus and the attribution service's trailing window see.").String(),
		web:        webserver.AddFlags(c, ":9835"),
	}
}

func (c *demoCmd) run(ctx context.Context, logger *slog.Logger) error {
	return demo.Run(ctx, demo.Config{ScenarioPath: *c.scenario, SimStart: *c.simStart, Fast: *c.fast, FlushInterval: *c.flush,
		Report: c.stdout, ReportPath: *c.reportPath, Format: *c.format, Brokers: kafkaconn.ParseBrokers(*c.brokers), DSN: *c.dsn,
		Partitions: *c.partitions, Web: c.web}, logger)
}
