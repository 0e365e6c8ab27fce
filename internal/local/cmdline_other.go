//go:build !linux

package local

import "github.com/procsupervisor/supervisor/internal/token"

// Argv returns nil: without /proc, arguments are not read here.
func Argv(pid int32, tok token.Token) ([]string, bool) { return nil, false }
