package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/local"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/redact"
	"github.com/procsupervisor/supervisor/internal/store"
	"golang.org/x/sys/unix"
)

// redactClaim rewrites c's argv by rules: with Argv when it is fresh (as
// a request or /proc gave it), with Again when it was read back from the
// store, where it may have been redacted before (what a marker stands in
// then never becomes something else). It reports whether the argv
// changed; with no rules it costs nothing.
func redactClaim(rules *redact.Rules, c *store.Claim, fresh bool) bool {
	if rules.Empty() {
		return false
	}
	f := rules.Again
	if fresh {
		f = rules.Argv
	}
	argv, changed := f(c.Argv)
	if !changed || slices.Equal(argv, c.Argv) {
		return false
	}
	if len(argv) > 0 && argv[0] != c.Argv[0] {
		// A failed launch's reasons quote its argv[0] (hideArgv0 hid it
		// when the rules were there at the launch).
		real, shown := c.Argv[0], argv[0]
		c.RetiredReason = hideIn(c.RetiredReason, real, shown)
		if v := c.LastVerdict; v != nil && strings.Contains(v.Reason, real) {
			vv := *v // shared with the index's copy
			vv.Reason = hideIn(v.Reason, real, shown)
			c.LastVerdict = &vv
		}
	}
	c.Argv = argv
	return true
}

// hideIn returns s with every occurrence of real replaced by shown.
func hideIn(s, real, shown string) string {
	if real == "" {
		return s
	}
	return strings.ReplaceAll(s, real, shown)
}

// hideArgv0 returns err with every occurrence of the real argv[0] replaced
// by the one shown (redacted), for an error that goes where the claim's
// argv goes: its stored reason, the API answer, the launch's log line.
// The error is kept for errors.Is when nothing is hidden.
func hideArgv0(err error, real, shown string) error {
	if err == nil || real == shown || real == "" || !strings.Contains(err.Error(), real) {
		return err
	}
	return &hidden{msg: hideIn(err.Error(), real, shown), err: err}
}

// hidden is an error whose text is rewritten; Unwrap keeps the chain for
// errors.Is (whose callers never print the inner text).
type hidden struct {
	msg string
	err error
}

func (h *hidden) Error() string { return h.msg }
func (h *hidden) Unwrap() error { return h.err }

// procHiddenFrom reports whether /proc hides other users' processes from
// p: p is not root, and the daemon's /proc or the caller's own is mounted
// with hidepid (or its mount cannot be read). The daemon reads what such
// a mount denies that user, so it must not show it. The caller's /proc is
// the one its mount namespace and root directory show it (a sandbox's,
// systemd's ProtectProc=invisible): judged by the daemon's alone, a
// caller whose /proc showed it two processes was given every command
// line of the host through tree.
func (d *Daemon) procHiddenFrom(ctx context.Context, p api.Peer) bool {
	if p.Root() {
		return false
	}
	mi, err := readCapped("/proc/self/mountinfo", maxMountinfo)
	if err != nil || procHidesPids(mi) {
		return true
	}
	return d.callerProcHides(ctx, p)
}

// maxMountinfo bounds a mount table read to judge a caller's /proc: a
// user can make its own mount namespace's as long as it likes (millions
// of bytes, and seconds of the kernel's time to produce), so a longer
// one is not read and counts as hiding. A host's or a container's table
// is far shorter; a caller in the daemon's own world is not read at all.
const maxMountinfo = 256 << 10

// callerProcHides reports whether the /proc of the caller's view hides
// other users' processes: the daemon's view when the caller shares the
// daemon's mount namespace and root directory (as callers mostly do), else
// its mountinfo, read at its pid, which shows mount points relative to
// its root. What was read counts only if the caller lived through it (the
// socket's pidfd of it, see callerAlive), so the pid was not another
// process's; a caller gone, or whose mounts cannot be read or are too
// many, is hidden from.
func (d *Daemon) callerProcHides(ctx context.Context, p api.Peer) bool {
	if p.Pid <= 0 {
		return true
	}
	alive, done := callerAlive(ctx, p, d.boot)
	if alive == nil {
		return true
	}
	defer done()
	dir := "/proc/" + strconv.Itoa(int(p.Pid))
	if root, err := os.OpenFile(dir+"/root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
		away := elsewhere(p.Pid, root)
		root.Close()
		if !away {
			return !alive() // the daemon's /proc, judged by procHiddenFrom
		}
	}
	mi, err := readCapped(dir+"/mountinfo", maxMountinfo)
	return err != nil || !alive() || procHidesPids(mi)
}

// errTooLong is readCapped's error for a file longer than its bound.
var errTooLong = errors.New("longer than its bound")

// readCapped reads the file at path whole if it is at most max bytes long.
func readCapped(path string, max int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > max {
		return nil, fmt.Errorf("%s: %w (%d bytes)", path, errTooLong, max)
	}
	return b, nil
}

// visibleNodes keeps of a tree, for a user /proc hides other users'
// processes from, what that user could see: its own live processes
// (procWhollyOf), and the exited ones of its own claims. The first node, the one
// asked for, stays in any case, as a pid alone when hidden (kill(2) tells
// any user a pid is in use); Arrange hangs what is kept below the
// nearest kept ancestor, or the first node. Before, the daemon gave every
// process's command name, token and parent under hidepid=2.
func (d *Daemon) visibleNodes(p api.Peer, nodes []api.TreeNode) []api.TreeNode {
	out := nodes[:0]
	for i, n := range nodes {
		var visible bool
		if n.Exited {
			uid, ok := d.claims.uidOf(n.Root)
			visible = n.Root != "" && ok && uid == p.UID
		} else {
			own, err := procWhollyOf(p, n.Pid)
			visible = err == nil && own
		}
		switch {
		case visible:
			out = append(out, n)
		case i == 0:
			out = append(out, api.TreeNode{Pid: n.Pid, Exited: n.Exited})
		}
	}
	return out
}

// treeArgs gives each live node of a tree its command line, read for
// that exact instance (local.Argv) and redacted by the daemon's patterns:
// the client shows these and reads no /proc of its own for the daemon's
// tree, so the patterns hold in `supervisor tree` too. A user other than
// root is shown what it could read itself: every command line when /proc
// is mounted without hidepid, else (ownOnly) those of its own processes
// only (procWhollyOf). Past api.MaxTreeArgs bytes of command lines the
// rest of the nodes get none.
func (d *Daemon) treeArgs(p api.Peer, ownOnly bool, nodes []api.TreeNode) {
	total := 0 // bytes of command lines read: at most api.MaxTreeArgs
	for i := range nodes {
		if total >= cmp.Or(d.treeArgsMax, api.MaxTreeArgs) {
			return
		}
		n := &nodes[i]
		if n.Exited {
			continue
		}
		if ownOnly {
			// Read before the arguments, whose token check then proves
			// both were of this instance.
			if own, err := procWhollyOf(p, n.Pid); err != nil || !own {
				continue
			}
		}
		argv, cut := local.Argv(n.Pid, n.Token)
		redact := d.redact.Argv
		if cut {
			// The last argument may be the start of a secret a pattern
			// hides whole.
			redact = d.redact.ArgvCut
		}
		n.Args, n.ArgsRedacted = redact(argv)
		for _, a := range argv {
			total += len(a) + 1
		}
	}
}

// procHidesPids reports whether the proc mounted at /proc in mountinfo
// hides other users' processes (a hidepid option other than 0 or off).
// The last mount at /proc is the one seen; a mountinfo without one, or a
// line that cannot be read, answers true: when unsure, hide.
func procHidesPids(mountinfo []byte) bool {
	hides := true
	for m := range procfs.Mounts(mountinfo) {
		if m.Point != "/proc" {
			continue
		}
		// Something else mounted over /proc, or proc without options.
		hides = m.FSType != "proc" || m.Options == ""
		for opt := range strings.SplitSeq(m.Options, ",") {
			if v, ok := strings.CutPrefix(opt, "hidepid="); ok && v != "0" && v != "off" {
				hides = true
			}
		}
	}
	return hides
}
