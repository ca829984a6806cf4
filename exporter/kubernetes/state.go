package kubernetes

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// State is what the exporter published, kept in a file so that a restart re-lists the pods and
// publishes nothing new, and ends the allocations of pods deleted while it was down.
type State struct {
	// LastSeen is the last refresh at which the exporter saw the pods of Sent: a pod found gone
	// at the next start ended after it (it is ended then, under-billing at most the down time).
	LastSeen time.Time        `json:"last_seen"`
	Sent     map[string]*Sent `json:"sent"`
}

// LoadState reads the state file; a missing file (or path) is an empty state.
func LoadState(path string) (State, error) {
	st := State{Sent: map[string]*Sent{}}
	if path == "" {
		return st, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("read the Kubernetes allocation state %s: %w", path, err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return State{Sent: map[string]*Sent{}}, fmt.Errorf("read the Kubernetes allocation state %s: %w", path, err)
	}
	if st.Sent == nil {
		st.Sent = map[string]*Sent{}
	}
	return st, nil
}

// Save writes the state file atomically (a crash leaves the old or the new one); no path: no-op.
func (st State) Save(path string) error {
	if path == "" {
		return nil
	}
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("write the Kubernetes allocation state: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".kubernetes-state-*")
	if err != nil {
		return fmt.Errorf("write the Kubernetes allocation state %s: %w", path, err)
	}
	_, werr := tmp.Write(b)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write the Kubernetes allocation state %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write the Kubernetes allocation state %s: %w", path, err)
	}
	return nil
}
