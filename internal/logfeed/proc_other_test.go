//go:build !linux

package logfeed

import (
	"os"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/token"
)

// realEvents outside Linux describes made-up processes with microsecond
// tokens, as the sysctl fallback produces them.
func realEvents(t *testing.T) *procEvents {
	now := time.Now()
	pe := &procEvents{childPid: 4242, argv: []string{"/bin/sleep", "60"}, exe: "/bin/sleep",
		exitCode: 3, killedBy: "SIGKILL", startedAfter: now, startedBefore: now}
	pe.child = token.Token{Start: uint64(now.UnixMicro()), Prec: token.Micro}
	pe.parent = token.Token{Start: uint64(now.UnixMicro()) - 1, Prec: token.Micro}
	fork := events.Event{Kind: events.Fork, Mechanism: events.SysctlPoll, Pid: 4242, PPid: int32(os.Getpid()),
		Token: pe.child, ParentToken: pe.parent, Inferred: true}
	copy(fork.Comm[:], "sleep")
	ex := fork
	ex.Kind, ex.Exe, ex.Argv = events.Exec, pe.exe, pe.argv
	exit := fork
	exit.Kind, exit.Status = events.Exit, 9
	exit2 := fork
	exit2.Kind, exit2.Pid, exit2.Status = events.Exit, 4243, 3<<8
	pe.all = []events.Event{fork, ex, exit, exit2}
	return pe
}
