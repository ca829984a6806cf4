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

// CorruptStateError is a state file that was read but holds no state (empty, truncated, not
// JSON): a crash of an older exporter, a full disk. The exporter moves it aside and starts
// empty rather than not starting.
type CorruptStateError struct {
	Path string
	Err  error // the parse error
}

func (e *CorruptStateError) Error() string {
	return fmt.Sprintf("read the Kubernetes allocation state %s: not a state file: %v", e.Path, e.Err)
}

func (e *CorruptStateError) Unwrap() error { return e.Err }

// LoadState reads the state file; a missing file (or path) is an empty state. A file that is
// not a state gives a *CorruptStateError.
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
		return State{Sent: map[string]*Sent{}}, &CorruptStateError{Path: path, Err: err}
	}
	if st.Sent == nil {
		st.Sent = map[string]*Sent{}
	}
	return st, nil
}

// MoveAside renames a corrupt state file to <path>.corrupt-<time>, kept for a post-mortem,
// and says where it went.
func MoveAside(path string, now time.Time) (string, error) {
	to := path + ".corrupt-" + now.UTC().Format("20060102T150405.000Z")
	if err := os.Rename(path, to); err != nil {
		return "", fmt.Errorf("move the corrupt Kubernetes allocation state %s aside: %w", path, err)
	}
	return to, nil
}

// Save writes the state file atomically (a crash leaves the old or the new one); no path: no-op.
func (st State) Save(path string) error { return st.save(path, (*os.File).Sync) }

// save is Save with the fsync given: the new file is synced before the rename publishes it
// (else a crash can leave the new name on an empty file), the directory after (else the
// rename itself can be lost).
func (st State) save(path string, sync func(*os.File) error) error {
	if path == "" {
		return nil
	}
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("write the Kubernetes allocation state: %w", err)
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".kubernetes-state-*")
	if err != nil {
		return fmt.Errorf("write the Kubernetes allocation state %s: %w", path, err)
	}
	_, werr := tmp.Write(b)
	var serr error
	if werr == nil {
		serr = sync(tmp)
	}
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write the Kubernetes allocation state %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write the Kubernetes allocation state %s: %w", path, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync the directory of the Kubernetes allocation state %s: %w", path, err)
	}
	serr = sync(d)
	if err := errors.Join(serr, d.Close()); err != nil {
		return fmt.Errorf("sync the directory of the Kubernetes allocation state %s: %w", path, err)
	}
	return nil
}
