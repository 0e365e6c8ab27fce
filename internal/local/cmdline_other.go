//go:build !linux

package local

import "github.com/procsupervisor/supervisor/internal/token"

// Cmdline returns "": without /proc, a command line is not read here.
func Cmdline(pid int32, tok token.Token) string { return "" }

// Argv returns nil: without /proc, arguments are not read here.
func Argv(pid int32, tok token.Token) ([]string, bool) { return nil, false }
