package allocation

import (
	"encoding/json"
	"testing"
	"time"
)

// TestToJSONWritesWhatTimeMarshals: the API used to write time.Time fields; the wire type's
// strings must give the same bytes.
func TestToJSONWritesWhatTimeMarshals(t *testing.T) {
	type timed struct {
		ID          string     `json:"allocation_id"`
		Tenant      string     `json:"tenant"`
		Tier        string     `json:"tier"`
		Node        string     `json:"node"`
		Instance    string     `json:"instance_id"`
		RequestedAt time.Time  `json:"requested_at"`
		StartedAt   time.Time  `json:"started_at"`
		EndedAt     *time.Time `json:"ended_at"`
	}
	t0 := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	for _, a := range []Allocation{
		{ID: "a1", Tenant: "acme", Tier: "pro", Node: "node-a", Instance: "gpu0/mig1", RequestedAt: t0, StartedAt: t0.Add(1500 * time.Millisecond), EndedAt: t0.Add(time.Hour)},
		{ID: "running", Tenant: "<b&c>", Tier: "pro", Node: "n", Instance: "i", RequestedAt: t0.Add(time.Nanosecond), StartedAt: t0.Add(time.Second)},
		{ID: "zone", Tenant: "t", Tier: "pro", Node: "n", Instance: "i", RequestedAt: t0.In(time.FixedZone("x", 3600)), StartedAt: t0},
	} {
		old := timed{ID: a.ID, Tenant: a.Tenant, Tier: a.Tier, Node: a.Node, Instance: a.Instance, RequestedAt: a.RequestedAt, StartedAt: a.StartedAt}
		if !a.EndedAt.IsZero() {
			old.EndedAt = &a.EndedAt
		}
		want, err := json.Marshal(old)
		if err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(ToJSON(a))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("ToJSON(%s):\n got %s\nwant %s", a.ID, got, want)
		}
	}
}

func TestJSONValuesFollowFields(t *testing.T) {
	ended := "e"
	j := JSON{ID: "id", Tenant: "t", Tier: "tier", Node: "n", Instance: "i", RequestedAt: "r", StartedAt: "s", EndedAt: &ended}
	got, _ := json.Marshal(j)
	var keys map[string]string
	if err := json.Unmarshal(got, &keys); err != nil {
		t.Fatal(err)
	}
	for i, v := range j.Values() {
		if keys[Fields[i]] != v {
			t.Errorf("field %s: JSON has %q, Values %q", Fields[i], keys[Fields[i]], v)
		}
	}
	if v := (JSON{}).Values()[7]; v != "" {
		t.Errorf("null ended_at: %q, want empty", v)
	}
}
