//go:build exporter_only

package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/alecthomas/kingpin/v2"

	"github.com/slicemeter/slicemeter/internal/usage"
)

// newServerCommand, in the exporter-only binary, registers name as a hidden command that
// refuses to run: a DaemonSet or a person that runs `slicemeter-exporter report` learns that
// this binary is not the one, with exit status 2, instead of kingpin's "expected command".
func newServerCommand(name string, app *kingpin.Application, _ io.Writer) command {
	app.Command(name, "Not in this binary: use the full slicemeter binary.").Hidden()
	return notInThisBinary(name)
}

// notInThisBinary is a command that the exporter-only build leaves out.
type notInThisBinary string

func (n notInThisBinary) leftOut() error {
	return usage.Errorf("this binary is the exporter only; use the full slicemeter binary for %s", string(n))
}

func (n notInThisBinary) run(context.Context, *slog.Logger) error { return n.leftOut() }
