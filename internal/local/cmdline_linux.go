package local

import (
	"context"
	"strings"

	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/token"
)

// Cmdline returns the command line of the process instance (pid, tok),
// its arguments joined by spaces, or "" when it cannot be read or pid no
// longer is that instance. /proc names a pid, not an instance: the token is
// read through a pidfd after the command line, and a pid reissued since
// (a token that differs) shows nothing rather than another program's
// arguments. A zero tok is not checked.
func Cmdline(pid int32, tok token.Token) string {
	argv, err := procfs.ReadCmdline("/proc", pid)
	if err != nil || len(argv) == 0 {
		return ""
	}
	if !tok.IsZero() {
		now, err := ReadToken(context.Background(), pid)
		if err != nil {
			return ""
		}
		if m, _ := token.Compare(tok, now); m == token.Different || m == token.OtherBoot {
			return ""
		}
	}
	return strings.Join(argv, " ")
}
