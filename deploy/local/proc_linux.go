package local

import (
	"fmt"
	"os"
	"strings"
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

// machineState is what a server's unexpected death is read beside: the free space where its
// data is (a full disk) and the memory left to the machine (the OOM killer).
func machineState(dir string) string {
	var fs syscall.Statfs_t
	disk := "unknown"
	if err := syscall.Statfs(dir, &fs); err == nil {
		disk = fmt.Sprintf("%d MiB", fs.Bavail*uint64(fs.Bsize)>>20)
	}
	mem := "unknown"
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
				mem = strings.TrimSpace(v)
			}
		}
	}
	return fmt.Sprintf("disk free under %s: %s, memory available: %s", dir, disk, mem)
}
