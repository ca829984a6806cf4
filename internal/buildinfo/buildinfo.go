// Package buildinfo is the build's version, as prometheus/common/version holds it (stamped by
// `make build`'s -ldflags) and as slicemeter_build_info serves it.
package buildinfo

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/prometheus/common/version"
)

// Print writes the version, branch, revision and Go version of this build.
func Print(w io.Writer) { fmt.Fprintln(w, version.Print("slicemeter")) }

// Default fills the version a build without `make build`'s -ldflags lacks from the Go build
// info: the module version of `go install …@vX`, "(devel)" for a checkout.
func Default() {
	if version.Version != "" {
		return
	}
	version.Version = "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		version.Version = bi.Main.Version
	}
}
