package chtest

import (
	"encoding/json"
	"fmt"
	"math"
)

// Differences lists where a and b differ, as JSON values (a Go value is read as its JSON):
// numbers to 1e-9 (relative, or absolute below 1), anything else exactly. Readers of the
// same figures by two paths (minutes and their roll-ups) are compared with it.
func Differences(path string, a, b any) []string {
	norm := func(v any) any {
		switch v.(type) {
		case nil, bool, float64, string, map[string]any, []any:
			return v // a JSON value already
		}
		raw, _ := json.Marshal(v)
		var out any
		_ = json.Unmarshal(raw, &out)
		return out
	}
	a, b = norm(a), norm(b)
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return []string{fmt.Sprintf("%s: %v ≠ %v", path, a, b)}
		}
		var out []string
		for k := range x {
			out = append(out, Differences(path+"."+k, x[k], y[k])...)
		}
		return out
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return []string{fmt.Sprintf("%s: %d ≠ %d items", path, len(x), len(y))}
		}
		var out []string
		for i := range x {
			out = append(out, Differences(fmt.Sprintf("%s[%d]", path, i), x[i], y[i])...)
		}
		return out
	case float64:
		y, ok := b.(float64)
		if !ok || math.Abs(x-y) > 1e-9*max(1, math.Abs(x)) {
			return []string{fmt.Sprintf("%s: %v ≠ %v", path, a, b)}
		}
		return nil
	}
	if a != b {
		return []string{fmt.Sprintf("%s: %v ≠ %v", path, a, b)}
	}
	return nil
}
