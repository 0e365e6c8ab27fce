//go:build !linux

package procfs

// bootOffsetTicks is 0 where there are no time namespaces.
func bootOffsetTicks() int64 { return 0 }
