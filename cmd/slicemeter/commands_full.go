//go:build !exporter_only

package main

import (
	"io"

	"github.com/alecthomas/kingpin/v2"
)

// newServerCommand registers one of the commands that only the full binary holds: every one
// but the exporter and version (main.go's newCommand).
func newServerCommand(name string, app *kingpin.Application, stdout io.Writer) command {
	switch name {
	case "collector":
		return newCollectorCmd(app)
	case "attribution":
		return newAttributionCmd(app)
	case "migrate":
		return newMigrateCmd(app)
	case "report":
		return newReportCmd(app, stdout)
	case "fleet":
		return newFleetCmd(app, stdout)
	case "advise":
		return newAdviseCmd(app, stdout)
	case "demo":
		return newDemoCmd(app, stdout)
	case "allocations":
		return newAllocationsCmd(app, stdout)
	case "pricebook":
		return newPricebookCmd(app, stdout)
	case "period":
		return newPeriodCmd(app, stdout)
	case "statement":
		return newStatementCmd(app, stdout)
	case "api":
		return newAPICmd(app, stdout)
	}
	panic("slicemeter: no command " + name + " in commands_full.go") // a name added to commandNames only
}
