//go:build !linux

package local

import (
	"os"
	"syscall"
)

// childAttr: outside Linux there is no parent-death signal; Stop or Close must be called.
func childAttr() *syscall.SysProcAttr { return nil }

func signalTree(p *os.Process, sig syscall.Signal) error { return p.Signal(sig) }

// machineState: the free disk and memory are read on Linux only.
func machineState(dir string) string { return "machine state not read outside Linux" }
