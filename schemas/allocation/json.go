package allocation

import "time"

// JSON is an allocation on the wire, the one JSON form for reading (HTTP API, files) and
// writing (HTTP API): times are RFC 3339 strings, so that a decoding error can quote what it
// was given, and ended_at is null while running.
type JSON struct {
	ID          string  `json:"allocation_id"`
	Tenant      string  `json:"tenant"`
	Tier        string  `json:"tier"`
	Node        string  `json:"node"`
	Instance    string  `json:"instance_id"`
	RequestedAt string  `json:"requested_at"`
	StartedAt   string  `json:"started_at"`
	EndedAt     *string `json:"ended_at"`
}

// ToJSON is a's wire form. Times are written as time.Time's MarshalJSON writes them
// (RFC 3339 with nanoseconds, in the time's own zone).
func ToJSON(a Allocation) JSON {
	j := JSON{ID: a.ID, Tenant: a.Tenant, Tier: a.Tier, Node: a.Node, Instance: a.Instance,
		RequestedAt: a.RequestedAt.Format(time.RFC3339Nano), StartedAt: a.StartedAt.Format(time.RFC3339Nano)}
	if !a.EndedAt.IsZero() {
		ended := a.EndedAt.Format(time.RFC3339Nano)
		j.EndedAt = &ended
	}
	return j
}

// Values are j's fields as text, in Fields order; a null ended_at is empty.
func (j JSON) Values() []string {
	ended := ""
	if j.EndedAt != nil {
		ended = *j.EndedAt
	}
	return []string{j.ID, j.Tenant, j.Tier, j.Node, j.Instance, j.RequestedAt, j.StartedAt, ended}
}
