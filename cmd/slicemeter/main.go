// Command slicemeter meters what every tenant of a shared GPU fleet gets and pays for.
//
//	slicemeter exporter | collector | attribution | migrate | report | fleet | period | statement | pricebook | demo | api | version
//
// Every flag can also be set with an environment variable: SLICEMETER_ and the flag name in
// upper case with dots and dashes as underscores (--kafka.brokers: SLICEMETER_KAFKA_BROKERS),
// but for where the demo writes (its --clickhouse.dsn, --kafka.brokers and Kafka security
// flags: the command line only, demo.go).
package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/alecthomas/kingpin/v2"

	"github.com/slicemeter/slicemeter/internal/buildinfo"
	"github.com/slicemeter/slicemeter/internal/lograte"
	"github.com/slicemeter/slicemeter/internal/startuplog"
	"github.com/slicemeter/slicemeter/internal/usage"
)

// Exit statuses.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2 // bad flags, bad config, bad scenario
)

// command is a subcommand: it registers its flags, then runs.
type command interface {
	run(ctx context.Context, logger *slog.Logger) error
}

// runFunc is a command that is one function.
type runFunc func(ctx context.Context, logger *slog.Logger) error

func (f runFunc) run(ctx context.Context, logger *slog.Logger) error { return f(ctx, logger) }

func main() {
	buildinfo.Default()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	app := kingpin.New("slicemeter", "Per-tenant cost, waste, overhead, jitter and cold start of shared GPUs (MIG, vGPU, time-slicing).")
	exited := -1
	// Once --help or --version has answered, kingpin's parse goes on: silence what it adds.
	// The usage waits for the parse's end: asked for (answered), to stdout with exit 0; printed
	// because no command was given, to stderr with exit 2.
	var usageText bytes.Buffer
	app.UsageWriter(untilExit{&usageText, &exited})
	app.ErrorWriter(untilExit{stderr, &exited})
	answered := false
	for _, f := range []*kingpin.FlagClause{app.HelpFlag.Short('h'), app.GetFlag("help-long"), app.GetFlag("help-man")} {
		f.PreAction(func(*kingpin.ParseContext) error { answered = true; return nil })
	}
	app.DefaultEnvars()
	app.Terminate(func(code int) {
		if exited < 0 {
			exited = code
		}
	})
	logLevel := app.Flag("log.level", "Only log messages with this severity or above.").Default("info").Enum("debug", "info", "warn", "error")
	logFormat := app.Flag("log.format", "Log format.").Default("logfmt").Enum("logfmt", "json")
	app.Flag("version", "Print the version, branch and revision of this build.").NoEnvar().PreAction(func(*kingpin.ParseContext) error {
		buildinfo.Print(stdout)
		answered = true
		if exited < 0 {
			exited = exitOK
		}
		return nil
	}).Bool()

	commands := make(map[string]command, len(commandNames))
	for _, name := range commandNames {
		commands[name] = newCommand(name, app, stdout)
	}
	// A command this build leaves out is refused before kingpin parses its flags, which it
	// does not know here: "slicemeter report --from …" gets the reason, not "unknown flag".
	if pc, _ := app.ParseContext(args); pc != nil && pc.SelectedCommand != nil {
		if c, ok := commands[strings.Fields(pc.SelectedCommand.FullCommand())[0]].(leftOut); ok {
			fmt.Fprintf(stderr, "slicemeter: %v\n", c.leftOut())
			return exitUsage
		}
	}
	selected, err := app.Parse(args)
	if errors.Is(err, kingpin.ErrCommandNotSpecified) && !answered {
		_, _ = stderr.Write(usageText.Bytes())
		fmt.Fprintln(stderr, "slicemeter: expected a command (see the list above, or slicemeter --help)")
		return exitUsage
	}
	if exited >= 0 { // --help, help or --version
		_, _ = stdout.Write(usageText.Bytes())
		return exited
	}
	if err != nil {
		fmt.Fprintf(stderr, "slicemeter: %v (try --help)\n", err)
		return exitUsage
	}
	logger := newLogger(stderr, *logLevel, *logFormat)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd := commands[strings.Fields(selected)[0]]
	if services[selected] { // the long-running ones: their configuration, once, at start
		startuplog.Log(logger, selected, effectiveFlags(app, selected))
	}
	if err := cmd.run(ctx, logger); err != nil {
		fmt.Fprintf(stderr, "slicemeter %s: %v\n", selected, err)
		if usage.Is(err) {
			return exitUsage
		}
		return exitError
	}
	return exitOK
}

// commandNames are the commands of the full binary, in the order --help lists them.
var commandNames = []string{"exporter", "collector", "attribution", "migrate", "report", "fleet", "advise", "demo",
	"allocations", "pricebook", "version", "period", "statement", "api"}

// newCommand registers the command name on app. The exporter and version are in every build;
// the others come from newServerCommand, which the exporter-only build (-tags exporter_only,
// commands_exporter_only.go) replaces with a refusal so that a GPU node's binary does not
// link the database, Parquet and attribution code.
func newCommand(name string, app *kingpin.Application, stdout io.Writer) command {
	switch name {
	case "exporter":
		return newExporterCmd(app)
	case "version":
		return newVersionCmd(app, stdout)
	}
	return newServerCommand(name, app, stdout)
}

// leftOut is a command that this build does not hold: leftOut says why and what to run.
type leftOut interface {
	leftOut() error
}

func newLogger(w io.Writer, level, format string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: l, ReplaceAttr: lograte.Cap} // no value makes a line huge
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// services are the long-running commands.
var services = map[string]bool{"exporter": true, "collector": true, "attribution": true}

// effectiveFlags is the value of every flag of the application and of command (given, from
// the environment, or the default), kingpin's own (help, version, completion) left out.
func effectiveFlags(app *kingpin.Application, command string) []startuplog.Flag {
	model := app.Model()
	flags := model.Flags
	for _, c := range model.Commands {
		if c.FullCommand == command {
			flags = append(slices.Clone(flags), c.Flags...)
		}
	}
	var out []startuplog.Flag
	for _, f := range flags {
		if !f.Hidden && f.Value != nil && !strings.HasPrefix(f.Name, "help") && !strings.HasPrefix(f.Name, "completion-") && f.Name != "version" {
			out = append(out, startuplog.Flag{Name: f.Name, Value: f.Value.String()})
		}
	}
	return out
}

// untilExit writes to w until *exited is set.
type untilExit struct {
	w      io.Writer
	exited *int
}

func (u untilExit) Write(p []byte) (int, error) {
	if *u.exited >= 0 {
		return len(p), nil
	}
	return u.w.Write(p)
}
