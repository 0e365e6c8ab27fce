//go:build !linux

package logfeed

// adviseDontNeed does nothing off Linux: the feed's file stays in the page
// cache as the kernel sees fit.
func adviseDontNeed(int, int64, int64) {}
