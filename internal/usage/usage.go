// Package usage marks errors caused by the user's input (bad flags, config, scenario or price
// book), which the binary reports with exit status 2. Services return them from their Config
// checks and start-up; only main turns them into an exit status.
package usage

import (
	"errors"
	"fmt"
)

// Error is an error caused by the user's input.
type Error struct{ Err error }

func (e Error) Error() string { return e.Err.Error() }
func (e Error) Unwrap() error { return e.Err }

// Errorf formats a usage error (%w wraps as with fmt.Errorf).
func Errorf(format string, args ...any) error { return Error{fmt.Errorf(format, args...)} }

// Wrap marks err as a usage error; nil stays nil.
func Wrap(err error) error {
	if err == nil {
		return nil
	}
	return Error{err}
}

// Is reports whether err, or an error it wraps, is a usage error.
func Is(err error) bool {
	var ue Error
	return errors.As(err, &ue)
}
