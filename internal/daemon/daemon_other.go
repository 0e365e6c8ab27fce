//go:build !linux

package daemon

import "context"

// Run is Linux-only.
func Run(ctx context.Context, cfg Config, ready func(Info)) error { return ErrUnsupported }

// Info describes a daemon that started serving.
type Info struct {
	Socket    string
	Mechanism string
}
