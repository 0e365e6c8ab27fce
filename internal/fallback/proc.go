package fallback

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/token"
)

// Proc snapshots the process table by reading ROOT/PID/stat for every pid
// (Linux). Tokens carry start ticks and the boot id, without the pidfs inode
// (binding a pidfd to every process on every poll costs too much).
type Proc struct {
	root string
	self int32
	seq  atomic.Uint64

	mu   sync.Mutex // serialises snapshots: r is reused
	r    *procfs.Reader
	boot procfs.BootID
	have bool
}

// NewProc returns a snapshotter for the proc file system at root (normally
// "/proc"). The table must contain the calling process.
func NewProc(root string) *Proc {
	return &Proc{root: root, self: int32(os.Getpid()), r: procfs.NewReader(root)}
}

// Mechanism returns events.ProcPoll.
func (p *Proc) Mechanism() events.Mechanism { return events.ProcPoll }

// Snapshot reads the table once. A process that exits while it is read is
// left out. Errors wrap ErrScanFailed or ErrImplausibleTable.
func (p *Proc) Snapshot(ctx context.Context) (*Snapshot, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	seq := p.seq.Add(1)
	if !p.have {
		b, err := procfs.ReadBootID(p.root)
		if err != nil {
			return nil, fmt.Errorf("proc: %w: %w", err, ErrScanFailed)
		}
		p.boot, p.have = b, true
	}
	taken := time.Now()
	btime, err := ReadBootTime(p.root)
	if err != nil {
		return nil, fmt.Errorf("proc: %w: %w", err, ErrScanFailed)
	}
	pids, err := procfs.Pids(p.root)
	if err != nil {
		return nil, fmt.Errorf("proc: %w: %w", err, ErrScanFailed)
	}
	s := &Snapshot{
		Seq: seq, Taken: taken, Mechanism: events.ProcPoll,
		Boot: p.boot, BootTime: btime, Self: p.self,
		Entries: make([]Entry, 0, len(pids)),
	}
	var st procfs.Stat
	for i, pid := range pids {
		if i&1023 == 0 && ctx.Err() != nil {
			return nil, fmt.Errorf("proc: %w: %w", ctx.Err(), ErrScanFailed)
		}
		if err := p.r.ReadStat(pid, &st); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return nil, fmt.Errorf("proc: pid %d: %w: %w", pid, err, ErrScanFailed)
		}
		s.Entries = append(s.Entries, Entry{
			Pid: pid, PPid: st.PPid, State: st.State, Comm: st.Comm,
			Token: token.Token{Boot: p.boot, Start: st.StartTime, Prec: token.Ticks},
		})
	}
	if err := s.finish(); err != nil {
		return nil, fmt.Errorf("proc: %w", err)
	}
	return s, nil
}
