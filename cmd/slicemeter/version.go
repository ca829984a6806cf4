package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/version"
)

type versionCmd struct{ stdout io.Writer }

func newVersionCmd(app *kingpin.Application, stdout io.Writer) *versionCmd {
	app.Command("version", "Print the version, branch and revision of this build.")
	return &versionCmd{stdout: stdout}
}

func (c *versionCmd) run(context.Context, *slog.Logger) error {
	printVersion(c.stdout)
	return nil
}

func printVersion(w io.Writer) { fmt.Fprintln(w, version.Print("slicemeter")) }

// defaultVersion fills the version a build without `make build`'s -ldflags lacks from the Go
// build info: the module version of `go install …@vX`, "(devel)" for a checkout.
func defaultVersion() {
	if version.Version != "" {
		return
	}
	version.Version = "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		version.Version = bi.Main.Version
	}
}
