package audit

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/slicemeter/slicemeter/schemas/allocation"
)

// TestNewEntry: the action, tenants and rows an entry records for each kind of write, and its
// wire form (before and after as objects, null where there is none).
func TestNewEntry(t *testing.T) {
	at := time.Date(2026, 1, 5, 1, 2, 3, 4, time.UTC)
	who := Actor{Door: DoorHTTP, Principal: "ops", Role: "operator", Origin: "10.0.0.1:5000"}
	prev := allocation.Allocation{ID: "a1", Tenant: "acme", Tier: "pro", Node: "n", Instance: "gpu0", RequestedAt: at, StartedAt: at}
	next := prev
	next.Tenant = "beta"
	tests := []struct {
		name                 string
		prev                 *allocation.Allocation
		deleted              bool
		action               Action
		tenant, beforeTenant string
		before, after        string // substrings of the JSON; "null" for none
	}{
		{"create", nil, false, ActionCreate, "beta", "", "null", `"tenant":"beta"`},
		{"change", &prev, false, ActionChange, "beta", "acme", `"tenant":"acme"`, `"tenant":"beta"`},
		{"delete", &prev, true, ActionDelete, "acme", "acme", `"tenant":"acme"`, "null"},
		{"delete of none", nil, true, ActionDelete, "beta", "", "null", "null"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := NewEntry(at, who, tt.prev, next, 7, tt.deleted)
			if e.Action != tt.action || e.Tenant != tt.tenant || e.BeforeTenant != tt.beforeTenant || e.Version != 7 || e.Actor != who || e.AllocationID != "a1" {
				t.Errorf("entry %+v", e)
			}
			j := ToJSON(e)
			if !strings.Contains(string(j.Before), tt.before) || !strings.Contains(string(j.After), tt.after) {
				t.Errorf("before %s after %s; want %s and %s", j.Before, j.After, tt.before, tt.after)
			}
			b, err := json.Marshal(j)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{`"time":"2026-01-05T01:02:03.000000004Z"`, `"door":"http"`, `"principal":"ops"`, `"origin":"10.0.0.1:5000"`, `"version":7`} {
				if !strings.Contains(string(b), want) {
					t.Errorf("%s lacks %s", b, want)
				}
			}
		})
	}
}
