//go:build !linux

package main

// restoreNofile does nothing here: the daemon that launches workloads is
// Linux's.
func restoreNofile() {}
