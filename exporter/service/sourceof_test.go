package service

import (
	"testing"

	"github.com/slicemeter/slicemeter/internal/usage"
)

// SourceOf: the source named wins; else a scenario means sim, a capture replay, nothing nvml.
func TestSourceOf(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     Config
		want    string
		wantErr bool
	}{
		{"bare: this node's GPUs", Config{}, "nvml", false},
		{"a scenario", Config{ScenarioPath: "s.yaml"}, "sim", false},
		{"a capture", Config{Replay: "c.capture"}, "replay", false},
		{"named wins", Config{Source: "nvml", ScenarioPath: "s.yaml"}, "nvml", false},
		{"both files, no source", Config{ScenarioPath: "s.yaml", Replay: "c.capture"}, "", true},
		{"both files, named", Config{Source: "replay", ScenarioPath: "s.yaml", Replay: "c.capture"}, "replay", false},
	} {
		got, err := SourceOf(tc.cfg)
		if got != tc.want || (err != nil) != tc.wantErr || (err != nil && !usage.Is(err)) {
			t.Errorf("%s: %q, %v; want %q (error: %v, a usage error)", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}
