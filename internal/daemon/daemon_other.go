//go:build !linux

package daemon

import "context"

// Run is Linux-only.
func Run(ctx context.Context, cfg Config, ready func(Info)) error { return ErrUnsupported }
