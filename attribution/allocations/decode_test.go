package allocations

import (
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/schemas/allocation"
)

func TestDecodeJSON(t *testing.T) {
	const one = `{"allocation_id": "a1", "tenant": "acme", "tier": "pro", "node": "node-a", "instance_id": "gpu0/mig0",
  "requested_at": "2026-01-05T00:00:00Z", "started_at": "2026-01-05T00:00:12Z", "ended_at": "2026-01-05T01:00:00Z"}`
	const running = `{"allocation_id": "a2", "tenant": "beta", "tier": "budget", "node": "node-a", "instance_id": "gpu1",
  "requested_at": "2026-01-05T00:00:00Z", "started_at": "2026-01-05T00:00:01.5Z", "ended_at": null}`
	tests := []struct {
		name, input string
		ids         []string
	}{
		{"array", "[\n" + one + ",\n" + running + "\n]", []string{"a1", "a2"}},
		{"object", one, []string{"a1"}},
		{"lines", one + "\n" + running + "\n", []string{"a1", "a2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeJSON("in.json", []byte(tt.input))
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, a := range got {
				ids = append(ids, a.ID)
			}
			if strings.Join(ids, ",") != strings.Join(tt.ids, ",") {
				t.Errorf("ids %v, want %v", ids, tt.ids)
			}
			if got[0].StartedAt != time.Date(2026, 1, 5, 0, 0, 12, 0, time.UTC) || got[0].EndedAt != time.Date(2026, 1, 5, 1, 0, 0, 0, time.UTC) {
				t.Errorf("times: %+v", got[0])
			}
			if len(got) > 1 && (!got[1].EndedAt.IsZero() || got[1].StartedAt.Nanosecond() != 5e8) {
				t.Errorf("running allocation: %+v", got[1])
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	const header = "allocation_id,tenant,tier,node,instance_id,requested_at,started_at,ended_at\n"
	const row = "a1,acme,pro,node-a,gpu0,2026-01-05T00:00:00Z,2026-01-05T00:00:10Z,2026-01-05T01:00:00Z\n"
	obj := func(field, value string) string {
		m := map[string]string{"allocation_id": `"a1"`, "tenant": `"acme"`, "tier": `"pro"`, "node": `"n"`, "instance_id": `"gpu0"`,
			"requested_at": `"2026-01-05T00:00:00Z"`, "started_at": `"2026-01-05T00:00:10Z"`, "ended_at": "null"}
		m[field] = value
		var parts []string
		for _, k := range append(Columns, "colour") {
			if m[k] != "" {
				parts = append(parts, `"`+k+`": `+m[k])
			}
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	tests := []struct {
		name, source, input string
		want                []string
	}{
		{"json syntax", "a.json", "[\n" + obj("", "") + ",\n{\"tenant\": }\n]", []string{"a.json:3", "malformed JSON"}},
		{"json empty", "a.json", "  ", []string{"a.json:1", "no allocations"}},
		{"json unknown field", "a.json", "[\n\n" + obj("colour", `"red"`) + "]", []string{"a.json:3", "colour: unknown field"}},
		{"json wrong type", "a.json", obj("tenant", "42"), []string{"a.json:1", "tenant: a JSON number; expected a string"}},
		{"json bad time", "a.json", "[" + obj("started_at", `"yesterday"`) + "]", []string{"started_at", `"yesterday"`, "RFC 3339"}},
		{"json missing tenant", "a.json", obj("tenant", `""`), []string{"tenant: empty"}},
		{"json reserved tenant", "a.json", obj("tenant", `"__unallocated__"`), []string{"a.json:1", `tenant: "__unallocated__"`, "not starting with _"}},
		{"json formula tenant", "a.json", obj("tenant", `"=HYPERLINK(\"http://x\")"`), []string{"a.json:1", "tenant: ", "= + - @"}},
		{"json missing started", "a.json", obj("started_at", `""`), []string{"started_at: missing"}},
		{"json started before requested", "a.json", obj("requested_at", `"2026-01-05T00:01:00Z"`), []string{"started_at: 2026-01-05T00:00:10Z", "at or after requested_at"}},
		{"json ended before started", "a.json", obj("ended_at", `"2026-01-05T00:00:05Z"`), []string{"ended_at: 2026-01-05T00:00:05Z", "after started_at"}},
		{"csv empty", "a.csv", "", []string{"a.csv:1", "empty file"}},
		{"csv unknown column", "a.csv", "allocation_id,colour\n", []string{"a.csv:1", "colour: unknown column"}},
		{"csv missing column", "a.csv", "allocation_id,tenant,tier,node,instance_id,requested_at\n", []string{"started_at: missing column"}},
		{"csv short row", "a.csv", header + row + "a2,acme\n", []string{"a.csv:3", "2 fields; expected 8"}},
		{"csv bad time", "a.csv", header + row + strings.Replace(row, "2026-01-05T01:00:00Z", "soon", 1), []string{"a.csv:3", `ended_at: "soon"`}},
		{"csv formula tenant", "a.csv", header + row + strings.Replace(row, "acme", "+cmd", 1), []string{"a.csv:3", `tenant: "+cmd"`}},
		{"csv quote", "a.csv", header + "\"a1,acme\n", []string{"a.csv:", "malformed CSV"}},
		{"csv header only", "a.csv", header, []string{"a.csv:2", "no allocations"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode(tt.source, []byte(tt.input))
			for _, w := range tt.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v should contain %q", err, w)
				}
			}
		})
	}
}

func TestDecodeCSV(t *testing.T) {
	// Any column order; ended_at may be left out or empty (running).
	in := "tenant,allocation_id,tier,node,instance_id,requested_at,started_at\nacme,a1,pro,node-a,gpu0,2026-01-05T00:00:00Z,2026-01-05T00:00:10Z\n"
	got, err := Decode("x.CSV", []byte(in))
	if err != nil || len(got) != 1 || got[0].ID != "a1" || got[0].Tenant != "acme" || !got[0].EndedAt.IsZero() {
		t.Errorf("got %+v, %v", got, err)
	}
}

func FuzzDecodeJSON(f *testing.F) {
	f.Add([]byte(`[{"allocation_id":"a","tenant":"t","tier":"pro","node":"n","instance_id":"i","requested_at":"2026-01-05T00:00:00Z","started_at":"2026-01-05T00:00:00Z"}]`))
	f.Add([]byte(`{"tenant": 1}`))
	f.Add([]byte("[\n{},\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		allocs, err := DecodeJSON("f.json", data)
		checkDecoded(t, allocs, err)
	})
}

func FuzzDecodeCSV(f *testing.F) {
	f.Add([]byte("allocation_id,tenant,tier,node,instance_id,requested_at,started_at,ended_at\na,t,pro,n,i,2026-01-05T00:00:00Z,2026-01-05T00:00:01Z,\n"))
	f.Add([]byte("allocation_id\n\"x"))
	f.Fuzz(func(t *testing.T, data []byte) {
		allocs, err := DecodeCSV("f.csv", data)
		checkDecoded(t, allocs, err)
	})
}

// checkDecoded: a decoder either fails naming the source, or returns only valid allocations.
func checkDecoded(t *testing.T, allocs []allocation.Allocation, err error) {
	if err != nil {
		if allocs != nil || !strings.HasPrefix(err.Error(), "f.") {
			t.Fatalf("error %v with %d allocations, or not naming the source", err, len(allocs))
		}
		return
	}
	for _, a := range allocs {
		if err := a.Validate("f", 0); err != nil {
			t.Fatalf("decoded an invalid allocation %+v: %v", a, err)
		}
	}
}

func TestLineCounter(t *testing.T) {
	c := newLineCounter([]byte("a\nbc\n\nd"))
	for _, tc := range []struct {
		offset int64
		want   int
	}{{0, 1}, {1, 1}, {2, 2}, {5, 3}, {6, 4}, {3, 2}, {99, 4}, {-1, 1}} {
		if got := c.at(tc.offset); got != tc.want {
			t.Errorf("at(%d) = %d, want %d", tc.offset, got, tc.want)
		}
	}
}

// TestAtLineNamesTheLineOfAnOverlap: a refusal found after decoding (an overlap between two
// allocations of one file) names the line the refused allocation is on, in CSV and JSON.
func TestAtLineNamesTheLineOfAnOverlap(t *testing.T) {
	const header = "allocation_id,tenant,tier,node,instance_id,requested_at,started_at,ended_at\n"
	row := func(id, start, end string) string {
		return id + ",acme,pro,node-a,gpu0," + start + "," + start + "," + end + "\n"
	}
	obj := func(id, start, end string) string {
		return `{"allocation_id": "` + id + `", "tenant": "acme", "tier": "pro", "node": "node-a", "instance_id": "gpu0",` + "\n" +
			`  "requested_at": "` + start + `", "started_at": "` + start + `", "ended_at": "` + end + `"}`
	}
	tests := []struct {
		source, data, want string
	}{
		{"a.csv", header + row("a1", "2026-01-05T00:00:00Z", "2026-01-05T01:00:00Z") +
			row("a2", "2026-01-05T01:00:00Z", "2026-01-05T02:00:00Z") +
			row("a3", "2026-01-05T01:30:00Z", "2026-01-05T03:00:00Z"), `a.csv: line 4: allocation "a3"`},
		{"a.json", "[\n" + obj("a1", "2026-01-05T00:00:00Z", "2026-01-05T01:00:00Z") + ",\n" +
			obj("a2", "2026-01-05T00:30:00Z", "2026-01-05T02:00:00Z") + "\n]", `a.json: line 4: allocation "a2"`},
	}
	for _, tc := range tests {
		allocs, lines, err := DecodeLines(tc.source, []byte(tc.data), nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.source, err)
		}
		err = AtLine(tc.source, lines, allocation.FirstOverlap(allocs, nil))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want it to start with %s", tc.source, err, tc.want)
		}
	}
}
