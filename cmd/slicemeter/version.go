package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/alecthomas/kingpin/v2"

	"github.com/slicemeter/slicemeter/internal/buildinfo"
)

type versionCmd struct{ stdout io.Writer }

func newVersionCmd(app *kingpin.Application, stdout io.Writer) *versionCmd {
	app.Command("version", "Print the version, branch and revision of this build.")
	return &versionCmd{stdout: stdout}
}

func (c *versionCmd) run(context.Context, *slog.Logger) error {
	buildinfo.Print(c.stdout)
	return nil
}
