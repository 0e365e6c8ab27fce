package local

import (
	"context"
	"strings"

	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/token"
)

// Cmdline returns the command line of the process instance (pid, tok),
// its arguments (Argv) joined by spaces, or "" when it cannot be read or
// pid no longer is that instance.
func Cmdline(pid int32, tok token.Token) string {
	return strings.Join(Argv(pid, tok), " ")
}

// Argv returns the arguments of the process instance (pid, tok), nil
// when they cannot be read or pid no longer is that instance. /proc names
// a pid, not an instance: the token is read through a pidfd after the
// command line, and a pid reissued since (a token that differs) shows
// nothing rather than another program's arguments. A zero tok is not
// checked.
func Argv(pid int32, tok token.Token) []string {
	argv, err := procfs.ReadCmdline("/proc", pid)
	if err != nil || len(argv) == 0 {
		return nil
	}
	if !tok.IsZero() {
		now, err := ReadToken(context.Background(), pid)
		if err != nil {
			return nil
		}
		if m, _ := token.Compare(tok, now); m == token.Different || m == token.OtherBoot {
			return nil
		}
	}
	return argv
}
