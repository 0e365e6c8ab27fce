package events

import (
	"errors"
	"os"

	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/token"
)

// Proc is one process found by a scan of /proc.
type Proc struct {
	Pid, PPid   int32
	Token       token.Token
	ParentToken token.Token
	Comm        [16]byte
}

// Scan reads every process under root (normally "/proc") and returns them
// with their tokens. Tokens from a scan carry start ticks only (no pidfs
// inode: binding a pidfd to every process would cost a syscall pair per
// process); their parent tokens come from the same scan. Processes that
// exit during the scan are left out, and so are zombies: they have exited,
// and their exit may still arrive as an event.
func Scan(root string, boot procfs.BootID) ([]Proc, error) {
	pids, err := procfs.Pids(root)
	if err != nil {
		return nil, err
	}
	r := procfs.NewReader(root)
	out := make([]Proc, 0, len(pids))
	index := make(map[int32]int, len(pids))
	var st procfs.Stat
	for _, pid := range pids {
		if err := r.ReadStat(pid, &st); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return nil, err
		}
		if st.Zombie() {
			continue
		}
		index[pid] = len(out)
		out = append(out, Proc{
			Pid: pid, PPid: st.PPid, Comm: st.Comm,
			Token: token.Token{Boot: boot, Start: st.StartTime, Prec: token.Ticks},
		})
	}
	for i := range out {
		if j, ok := index[out[i].PPid]; ok {
			out[i].ParentToken = out[j].Token
		}
	}
	return out, nil
}
