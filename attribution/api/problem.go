package api

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
)

// internalError answers a fault of the service (a 5xx but 501, which only says what this
// server does not serve) with a generic message and an id, and logs the whole error under that
// id: the reason of a fault names internal addresses (dial tcp 10.0.0.7:9000), database errors
// and other callers' windows, none of which the caller should read, while the operator needs
// all of it.
func (s *Server) internalError(w http.ResponseWriter, status int, err error) {
	id := errorID()
	s.logger().Error("request failed", "status", status, "error_id", id, "err", err)
	w.Header().Set("X-Error-Id", id)
	writeJSON(w, status, problem{Error: fmt.Sprintf("internal error: the service's log has the reason under error_id %s", id), ErrorID: id})
}

// errorID is 16 random hex digits: unique enough to find one line in a day's log.
func errorID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24)
	return hex.EncodeToString(b[:])
}
