//go:build !unix

package logfeed

// newArena returns no mapping: the batch uses the heap.
func newArena(int) arena { return arena{} }

func (a *arena) release() {}

func (a *arena) free() {}
