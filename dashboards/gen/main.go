// Command gen writes the generated dashboards to dashboards/json. Run it with
// `go generate ./dashboards` from the repository root.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/slicemeter/slicemeter/dashboards"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "dashboards/gen:", err)
		os.Exit(1)
	}
}

func run() error {
	all, err := dashboards.All()
	if err != nil {
		return err
	}
	for _, g := range all {
		data, err := dashboards.Marshal(g.Dashboard)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join("json", g.File), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
