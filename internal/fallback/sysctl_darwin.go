package fallback

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/token"
)

// Sysctl snapshots the process table through sysctl kern.proc.all (macOS).
// Tokens carry kinfo_proc p_starttime in microseconds of wall-clock time.
type Sysctl struct {
	self int32
	seq  atomic.Uint64
}

// NewSysctl returns a kern.proc snapshotter.
func NewSysctl() *Sysctl { return &Sysctl{self: int32(os.Getpid())} }

// Mechanism returns events.SysctlPoll.
func (s *Sysctl) Mechanism() events.Mechanism { return events.SysctlPoll }

// Snapshot reads the table once. Errors wrap ErrScanFailed or
// ErrImplausibleTable.
func (s *Sysctl) Snapshot(ctx context.Context) (*Snapshot, error) {
	seq := s.seq.Add(1)
	boot, err := HostBoot()
	if err != nil {
		return nil, fmt.Errorf("sysctl: %w: %w", err, ErrScanFailed)
	}
	taken := time.Now()
	procs, err := unix.SysctlKinfoProcSlice("kern.proc.all")
	if err != nil {
		return nil, fmt.Errorf("sysctl kern.proc.all: %w: %w", err, ErrScanFailed)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sysctl: %w: %w", err, ErrScanFailed)
	}
	snap := &Snapshot{Seq: seq, Taken: taken, Mechanism: events.SysctlPoll, Boot: boot, Self: s.self,
		Entries: make([]Entry, 0, len(procs))}
	for i := range procs {
		k := &procs[i]
		if k.Proc.P_pid < 0 {
			continue
		}
		e := Entry{Pid: k.Proc.P_pid, PPid: k.Eproc.Ppid, State: darwinState(k.Proc.P_stat)}
		st := k.Proc.P_starttime
		if st.Sec > 0 {
			e.Token = token.Token{Boot: boot, Start: uint64(st.Sec)*1e6 + uint64(st.Usec), Prec: token.Micro}
		}
		n := 0
		for n < len(k.Proc.P_comm) && k.Proc.P_comm[n] != 0 {
			n++
		}
		setComm(&e.Comm, string(k.Proc.P_comm[:n]))
		snap.Entries = append(snap.Entries, e)
	}
	// kern.proc.all lists the kernel task as pid 0; launchd is pid 1.
	if err := snap.finish(); err != nil {
		return nil, fmt.Errorf("sysctl: %w", err)
	}
	return snap, nil
}
