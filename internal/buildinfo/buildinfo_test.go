package buildinfo

import (
	"bytes"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/prometheus/common/version"
)

// What -ldflags set is kept; what they did not is taken from the VCS state Go recorded.
func TestFill(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "0123456789abcdef"},
		{Key: "vcs.time", Value: "2026-12-06T01:32:42Z"}, {Key: "vcs.modified", Value: "true"}}
	tests := []struct {
		name                    string
		stamped                 [3]string // Version, Revision, BuildDate from -ldflags
		bi                      *debug.BuildInfo
		version, revision, date string
	}{
		{"plain go build in a clone", [3]string{}, &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261206013242-0123456789ab"}, Settings: vcs},
			"v0.0.0-20261206013242-0123456789ab", "0123456789abcdef-modified", "2026-12-06T01:32:42Z (commit time)"},
		{"make build", [3]string{"1.2.3", "abc", "20261206-01:00:00"}, &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs},
			"1.2.3", "abc", "20261206-01:00:00"},
		{"no VCS information", [3]string{}, &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "(devel)", "", ""},
		{"no build info", [3]string{}, nil, "unknown", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			saved := [3]string{version.Version, version.Revision, version.BuildDate}
			defer func() { version.Version, version.Revision, version.BuildDate = saved[0], saved[1], saved[2] }()
			version.Version, version.Revision, version.BuildDate = tt.stamped[0], tt.stamped[1], tt.stamped[2]
			fill(tt.bi)
			if version.Version != tt.version || version.Revision != tt.revision || version.BuildDate != tt.date {
				t.Errorf("version %q, revision %q, date %q; want %q, %q, %q", version.Version, version.Revision, version.BuildDate, tt.version, tt.revision, tt.date)
			}
			var out bytes.Buffer
			Print(&out)
			if noted := strings.Contains(out.String(), "records no VCS revision"); noted != (version.GetRevision() == "unknown") {
				t.Errorf("note %v with revision %q:\n%s", noted, version.GetRevision(), out.String())
			}
		})
	}
}
