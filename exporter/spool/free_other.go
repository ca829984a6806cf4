//go:build !(linux || darwin || freebsd)

package spool

// freeBytes is unknown here: segments are sized by the limit alone.
func freeBytes(string) int64 { return -1 }
