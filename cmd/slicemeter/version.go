package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/alecthomas/kingpin/v2"

	"github.com/slicemeter/slicemeter/internal/buildinfo"
)

func newVersionCmd(app *kingpin.Application, stdout io.Writer) command {
	app.Command("version", "Print the version, branch and revision of this build.")
	return runFunc(func(context.Context, *slog.Logger) error { buildinfo.Print(stdout); return nil })
}
