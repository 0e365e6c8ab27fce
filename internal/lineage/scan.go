package lineage

import (
	"github.com/procsupervisor/supervisor/internal/events"
)

// Seed fills an empty graph from a /proc scan taken after the event source
// was attached and before its events are drained. Seeded nodes are not
// BornObserved and are watched since the seed; a later fork event for one
// of them is a duplicate that also teaches the graph its birth parent. Seed
// on a graph that already holds nodes is a Resync.
func (g *Graph) Seed(procs []events.Proc) {
	now := g.cfg.Now().UnixNano()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.now = now
	if g.seeded || g.s.n > 1 || g.pids.Len() > 0 {
		g.gap()
		g.reconcile(procs, true)
		return
	}
	g.seeded = true
	g.reconcile(procs, false)
}

// Resync reconciles the graph with a fresh scan after lost events: live
// nodes the scan does not hold are marked exited (ExitImplied, time
// unknown), processes the graph did not hold are added (not BornObserved),
// and the gap is recorded, so every node live across it is watched only
// since now.
func (g *Graph) Resync(procs []events.Proc) {
	now := g.cfg.Now().UnixNano()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.now = now
	g.gap()
	g.reconcile(procs, true)
}

func (g *Graph) reconcile(procs []events.Proc, sweep bool) {
	var seen []bool
	if sweep {
		seen = make([]bool, g.s.n)
	}
	added := make([]uint32, 0, 64)
	for k := range procs {
		p := &procs[k]
		tok := p.Token
		if p.Pid <= 0 || tok.IsZero() {
			g.stats.Malformed++
			continue
		}
		if !g.ownBoot(&tok) {
			g.stats.OtherBoot++
			continue
		}
		head := g.pids.Get(p.Pid)
		if i := g.match(head, tok); i != 0 {
			n := g.at(i)
			if n.live() {
				if int(i) < len(seen) {
					seen[i] = true
				}
				n.comm = p.Comm
			}
			// An exited node the scan lists is a zombie: exited, not
			// yet reaped. It stays exited.
			continue
		}
		i := g.newNode(p.Pid, tok)
		n := g.at(i)
		n.ppid, n.comm = p.PPid, p.Comm
		n.bornBoot = bootOf(tok)
		n.flags |= fNew
		if pt := p.ParentToken; !pt.IsZero() && pt.Boot == g.boot {
			n.pstart, n.pino, n.pprec = pt.Start, pt.Ino, pt.Prec
		}
		// The scan is the fresher word: the instance it lists is the pid's
		// newest generation, and a live node it replaces has exited.
		g.pushGeneration(head, i, n.bornBoot)
		added = append(added, i)
	}
	for _, i := range added {
		n := g.at(i)
		pt := g.parentTokenOf(n)
		if pt.IsZero() {
			// The scan did not list its parent: the parent exited
			// while the scan ran, or is a zombie. The graph's newest
			// record at that pid may be another instance whose exit
			// the loss hid (a member whose pid was reissued to the
			// real parent), so it is linked to nothing: a review's
			// stranger, forked by such a parent, became a member of
			// the claim the old instance was in.
			continue
		}
		if p := g.parentOf(n.ppid, pt, 0); p != 0 && !g.isAncestor(i, p) {
			g.linkChild(p, i)
		}
	}
	// Roots reach added nodes through their parents, which may be added
	// too: settle each from the nearest ancestor that is not new.
	for _, i := range added {
		g.rootFromOld(i)
	}
	for i := uint32(1); i < uint32(len(seen)); i++ {
		n := g.at(i)
		if n.list == onNone && n.live() && n.flags&fNew == 0 && !seen[i] {
			g.implyExit(i, 0)
		}
	}
	for _, i := range added {
		g.at(i).flags &^= fNew
	}
	g.expire()
}

// rootFromOld gives an added node the root of its nearest ancestor that was
// not added by the reconcile in progress. A root reached through a scan is
// never observed lineage.
func (g *Graph) rootFromOld(i uint32) {
	n := g.at(i)
	a := n.parent
	for k := uint32(0); a != 0 && g.at(a).flags&fNew != 0 && k <= g.s.n; k++ {
		a = g.at(a).parent
	}
	if a != 0 {
		n.root = g.at(a).root
	}
	n.flags &^= fRootObserved
}
