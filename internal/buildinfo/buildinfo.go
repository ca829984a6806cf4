// Package buildinfo is the build's version, as prometheus/common/version holds it (stamped by
// `make build`'s -ldflags) and as slicemeter_build_info serves it.
package buildinfo

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/prometheus/common/version"
)

// Print writes the version, branch, revision and Go version of this build; for a build that
// records no revision, a line saying why and how to get one.
func Print(w io.Writer) {
	fmt.Fprintln(w, version.Print("slicemeter"))
	if version.GetRevision() == "unknown" || version.GetRevision() == "" {
		fmt.Fprintln(w, "  note:             this build records no VCS revision: it was built with -buildvcs=false (GOFLAGS), outside a git clone "+
			"or in a git worktree; `make build` stamps it")
	}
}

// Default fills what a build without `make build`'s -ldflags lacks from the Go build info:
// the module version of `go install …@vX` ("(devel)" for a checkout), and, where Go recorded
// the VCS state (a plain `go build` in a git clone), the revision (with "-modified" for
// uncommitted changes) and the commit's time as the build date.
func Default() {
	bi, _ := debug.ReadBuildInfo()
	fill(bi)
}

// fill is Default with the build info given (nil: none).
func fill(bi *debug.BuildInfo) {
	if version.Version == "" {
		version.Version = "unknown"
		if bi != nil && bi.Main.Version != "" {
			version.Version = bi.Main.Version
		}
	}
	if bi == nil {
		return
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if rev := settings["vcs.revision"]; version.Revision == "" && rev != "" {
		if settings["vcs.modified"] == "true" {
			rev += "-modified"
		}
		version.Revision = rev
	}
	if t := settings["vcs.time"]; version.BuildDate == "" && t != "" {
		version.BuildDate = t + " (commit time)"
	}
}
