//go:build !linux

package spawn

// Main returns at once: the daemon, and so its shim, runs on Linux only.
func Main() {}
