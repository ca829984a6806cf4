//go:build linux || darwin || freebsd

package spool

import "syscall"

// freeBytes is the space an unprivileged process may still write in dir (-1: unknown).
func freeBytes(dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return -1
	}
	return int64(st.Bavail) * int64(st.Bsize)
}
