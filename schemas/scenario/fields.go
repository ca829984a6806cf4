package scenario

import (
	"fmt"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

// unknownFields finds the keys of doc that the raw shape t (rawScenario) has no field for, each
// an Error naming the file, the field's path and line, the closest known field and the fields
// expected there. The YAML decoder's own error names a Go type ("field intervall not found in
// type scenario.rawScenario"), which says nothing to whoever wrote the file. Fields read as
// yaml.Node (the price book's) are left to their own parser.
func unknownFields(file string, doc *yaml.Node, t reflect.Type) []error {
	var errs []error
	var walk func(n *yaml.Node, t reflect.Type, path string)
	walk = func(n *yaml.Node, t reflect.Type, path string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if n == nil || t == reflect.TypeFor[yaml.Node]() {
			return
		}
		switch t.Kind() {
		case reflect.Struct:
			if n.Kind != yaml.MappingNode {
				return // the decoder names a value of the wrong kind
			}
			names, fields := yamlFields(t)
			for i := 0; i+1 < len(n.Content); i += 2 {
				key, value := n.Content[i], n.Content[i+1]
				if key.Value == "<<" { // a merge key: its mapping's keys are checked where they are written
					continue
				}
				field, ok := fields[key.Value]
				if !ok {
					msg := fmt.Sprintf("line %d: field %s not found", key.Line, key.Value)
					if s := closest(key.Value, names); s != "" {
						msg += fmt.Sprintf(" (did you mean %s?)", s)
					}
					errs = append(errs, &Error{File: file, Field: join(path, key.Value), Msg: msg + "; expected one of " + strings.Join(names, ", ")})
					continue
				}
				walk(value, field.Type, join(path, key.Value))
			}
		case reflect.Slice:
			if n.Kind != yaml.SequenceNode {
				return
			}
			for i, item := range n.Content {
				walk(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
			}
		}
	}
	walk(doc, t, "")
	return errs
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// yamlFields are a struct's YAML keys, in declaration order, and its fields by key.
func yamlFields(t reflect.Type) ([]string, map[string]reflect.StructField) {
	var names []string
	fields := map[string]reflect.StructField{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		names = append(names, name)
		fields[name] = f
	}
	return names, fields
}

// closest is the known name nearest to s by edit distance, if it is near enough to be a typo
// of it (at most a third of its letters, and at least one, differ); "" otherwise.
func closest(s string, known []string) string {
	if len(s) > 64 { // no field is that long; and the distance's table grows with it
		return ""
	}
	best, bestD := "", -1
	for _, k := range known {
		d := editDistance(strings.ToLower(s), k)
		if d <= max(1, len(k)/3) && (bestD < 0 || d < bestD) {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the optimal-string-alignment distance of a and b: insertions, deletions,
// substitutions and transpositions of neighbours ("modle" is one from "model") each count 1
// (bytes: YAML keys here are ASCII).
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
