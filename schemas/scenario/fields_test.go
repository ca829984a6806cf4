package scenario

import (
	"os"
	"strings"
	"testing"
)

// A misspelt field is named by its file, path and line, with the closest known field and the
// fields expected there, not by the Go type the decoder reads it into.
func TestUnknownFieldSuggestsTheClosest(t *testing.T) {
	good, err := os.ReadFile("testdata/mig-basic.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, old, new string
		want           []string
	}{
		{"top level", "interval: 100ms", "intervall: 100ms", []string{
			"scenario f.yaml: intervall: line 6: field intervall not found (did you mean interval?); expected one of version, name, start, duration, interval,"}},
		{"in a node's GPU", "{model: H100-SXM5-80GB}", "{modle: H100-SXM5-80GB}", []string{
			"nodes[0].gpus[1].modle: line 15: field modle not found (did you mean model?); expected one of model, mig, gpm, faults, vgpu, share"}},
		{"in a workload", "workload: {sm: 0.5, mem: 0.6}", "workload: {sm: 0.5, memory: 0.6}", []string{
			"tenants[0].allocations[0].workload.memory: line 20: field memory not found; expected one of sm, steps, mem"}},
		{"nothing close", "name: mig-basic", "name: mig-basic\ncolour: red", []string{"colour: line 4: field colour not found; expected one of"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := strings.Replace(string(good), tt.old, tt.new, 1)
			_, err := Parse("f.yaml", []byte(data))
			if err == nil {
				t.Fatal("parsed")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not name %q:\n%v", w, err)
				}
			}
			if strings.Contains(err.Error(), "rawScenario") || strings.Contains(err.Error(), "in type") {
				t.Errorf("error names a Go type:\n%v", err)
			}
		})
	}
}

func TestClosest(t *testing.T) {
	known := []string{"version", "name", "start", "duration", "interval", "loop", "ids"}
	for s, want := range map[string]string{"intervall": "interval", "Interval": "interval", "nme": "name", "durration": "duration", "colour": "", "x": "", "idz": "ids"} {
		if got := closest(s, known); got != want {
			t.Errorf("closest(%q) = %q, want %q", s, got, want)
		}
	}
}
