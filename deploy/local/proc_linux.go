package local

import (
	"os"
	"syscall"
)

// childAttr puts a service in its own process group, so a terminal's Ctrl-C reaches only the
// caller (which then stops the service in order), and has the kernel SIGKILL it when the caller
// dies. Pdeathsig follows the thread that started the child; the Go runtime keeps its threads
// alive unless a goroutine exits while locked to one, which this package never does.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// signalTree signals the child's whole process group.
func signalTree(p *os.Process, sig syscall.Signal) error {
	return syscall.Kill(-p.Pid, sig)
}
