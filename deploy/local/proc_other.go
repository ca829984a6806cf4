//go:build !linux

package local

import (
	"os"
	"syscall"
)

// childAttr: outside Linux there is no parent-death signal; Stop or Close must be called.
func childAttr() *syscall.SysProcAttr { return nil }

func signalTree(p *os.Process, sig syscall.Signal) error { return p.Signal(sig) }
