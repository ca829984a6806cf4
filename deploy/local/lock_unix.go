//go:build unix

package local

import (
	"errors"
	"os"
	"syscall"
)

// tryLock takes a non-blocking flock(2) lock, the same lock flock(1) takes in install-deps.sh.
func tryLock(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return errLocked
	}
	return err
}
