package local

import (
	"context"

	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/token"
)

// Argv returns the arguments of the process instance (pid, tok), nil
// when they cannot be read or pid no longer is that instance. /proc names
// a pid, not an instance: the token is read through a pidfd after the
// command line, and a pid reissued since (a token that differs) shows
// nothing rather than another program's arguments. A zero tok is not
// checked. cut reports that the vector was longer than what was read
// (procfs.MaxCmdline): its last argument may be the start of one.
func Argv(pid int32, tok token.Token) (argv []string, cut bool) {
	argv, cut, err := procfs.ReadCmdline("/proc", pid)
	if err != nil || len(argv) == 0 {
		return nil, false
	}
	if !tok.IsZero() {
		now, err := ReadToken(context.Background(), pid)
		if err != nil {
			return nil, false
		}
		if m, _ := token.Compare(tok, now); m == token.Different || m == token.OtherBoot {
			return nil, false
		}
	}
	return argv, cut
}
