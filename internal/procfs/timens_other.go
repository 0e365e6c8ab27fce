//go:build !linux

package procfs

// bootOffsetTicks is 0 where there are no time namespaces.
func bootOffsetTicks() (int64, bool) { return 0, true }

// CheckTimeNamespace is nil where there are no time namespaces.
func CheckTimeNamespace() error { return nil }
