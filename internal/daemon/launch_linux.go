package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/actions"
	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/jobout"
	"github.com/procsupervisor/supervisor/internal/logfeed"
	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/redact"
	"github.com/procsupervisor/supervisor/internal/spawn"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func forbidden(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), api.ErrForbidden)
}

func badRequest(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), api.ErrBadRequest)
}

// procIDs reads the real uid and the supplementary groups of a process
// from /proc/PID/status, in one read so that both are of one instance.
func procIDs(pid int32) (uid uint32, groups []uint32, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/status")
	if err != nil {
		return 0, nil, err
	}
	ids, err := procfs.ParseStatusUIDs(b)
	if err != nil {
		return 0, nil, fmt.Errorf("process %d: %w", pid, err)
	}
	groups, err = procfs.ParseStatusGroups(b)
	if err != nil {
		return 0, nil, fmt.Errorf("process %d: %w", pid, err)
	}
	return ids.Real, groups, nil
}

// ownsProcess reports whether the peer may act on the bound process:
// root, or the process's real uid is the peer's. It reads after binding and
// confirms the handle still names a live process.
func ownsProcess(p api.Peer, h *pidfd.Handle) bool {
	if p.Root() {
		return true
	}
	uid, _, err := procIDs(h.Pid())
	return err == nil && uid == p.UID && !h.Exited()
}

// tokenFromPidfd reads the token of the process a spawn's pidfd names: the
// pidfs inode of the fd itself, the start ticks of /proc/PID/stat, and a
// signal 0 through the fd afterwards to confirm the stat was that
// process's. The caller keeps the child unreaped meanwhile, so the pid
// cannot have been reissued. (internal/pidfd has no constructor from an
// existing fd; this is its bind step for one.)
func tokenFromPidfd(fd int, pid int32, boot procfs.BootID) (token.Token, error) {
	var ino uint64
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(fd, &sfs); err != nil {
		return token.Token{}, fmt.Errorf("fstatfs pidfd: %w", err)
	}
	if sfs.Type == 0x50494446 { // PIDFS_MAGIC
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return token.Token{}, fmt.Errorf("fstat pidfd: %w", err)
		}
		ino = st.Ino
	}
	var st procfs.Stat
	r := procfs.Reader{Root: "/proc"}
	if err := r.ReadStat(pid, &st); err != nil {
		return token.Token{}, fmt.Errorf("stat of new process %d: %w", pid, err)
	}
	if err := unix.PidfdSendSignal(fd, 0, nil, 0); err != nil && !errors.Is(err, unix.EPERM) {
		return token.Token{}, fmt.Errorf("confirm new process %d: %w", pid, err)
	}
	return token.Token{Boot: boot, Start: st.StartTime, Ino: ino, Prec: token.Ticks}, nil
}

// Launch implements api.Backend. The workload runs as its caller would
// (creds_linux.go): the caller's uid and groups, the lower of its and the
// daemon's resource limits, a session of its own, descriptors 0-2 only,
// argv[0] found with its own rights (internal/spawn). The claim's lock is
// held from before the claim is stored until the process is recorded, so
// no reaper pass can settle it in between.
func (d *Daemon) Launch(ctx context.Context, p api.Peer, r *api.LaunchRequest) (cl api.Claim, err error) {
	var runAs *uint32
	var claimID string
	defer func() {
		argv, redacted := d.redact.Argv(r.Argv)
		d.log.Request(logfeed.Request{Action: logfeed.ActionLaunchRequested, UID: p.UID, GID: p.GID, Pid: p.Pid,
			ClaimID: claimID, Owner: r.Owner, Kind: string(kindOf(r.Detach)), Argv: argv, ArgsRedacted: redacted, RunAs: runAs,
			Target: cl.Pid, TargetTok: cl.Token, Err: err})
	}()
	if err := d.serves(p); err != nil {
		return api.Claim{}, err
	}
	id, err := workloadIdentity(p, r)
	if err != nil {
		return api.Claim{}, err
	}
	runAs = &id.uid
	bnd, err := workloadBounds(ctx, p, d.boot) // refuses a caller gone
	if err != nil {
		return api.Claim{}, err
	}
	defer bnd.close()
	if id.callers {
		id.groups = bnd.groups
	}
	kind := kindOf(r.Detach)
	c := store.Claim{
		ID: store.NewID(kind), Kind: kind, Owner: r.Owner, UID: p.UID, GID: p.GID, ShareUID: p.ShareUID,
		Argv: r.Argv, Cwd: r.Cwd, WallClock: time.Duration(r.WallClock), Limits: bnd.clamped,
		// A job under its caller's seccomp filters that is not root's
		// has no_new_privs: the shim needs it to attach them (spawn).
		NoNewPrivs: r.NoNewPrivs || bnd.noNewPrivs || bnd.seccompFrom != 0 && (id.uid != 0 || os.Geteuid() != 0),
	}
	// What is stored and shown is redacted; the workload gets r.Argv.
	redactClaim(d.redact, &c, true)
	claimID = c.ID
	if r.Bind {
		h, err := d.holder(ctx, p, r.Holder)
		if err != nil {
			return api.Claim{}, err
		}
		c.Holder = &store.Instance{Pid: h.Pid(), Token: h.Token()}
		h.Close()
	}
	env := r.Env
	if len(env) == 0 {
		env = []string{"PATH=" + defaultPath}
	}
	path := defaultPath
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			path = v
		}
	}
	var outPath string
	if kind == store.Job {
		outPath = filepath.Join(d.cfg.StateDir, "jobs", c.ID+".out")
	}
	cgPlanned := ""
	if d.cg.dir != "" {
		cgPlanned = filepath.Join(d.cg.dir, c.ID)
	}
	if err := roomFor(&c, cgPlanned, outPath); err != nil {
		return api.Claim{}, err
	}
	l := d.claimLock(c.ID)
	l.Lock()
	defer l.Unlock()
	if err := d.record(p, &c); err != nil {
		return api.Claim{}, err
	}

	fail := func(err error) (api.Claim, error) {
		now := d.now()
		// The root stored before the exec was the shim's, never the
		// workload's: the claim is a failed launch, never started.
		d.unindex(&c)
		failed := func(reason string) func(x *store.Claim) {
			return func(x *store.Claim) {
				x.Pid, x.Token, x.Pgid, x.Deadline = 0, token.Token{}, 0, time.Time{}
				x.State = store.Released
				x.Release = &store.Release{Dead: true, At: now}
				x.LastVerdict = &store.Verdict{Result: verdict.Gone, Reason: reason, At: now}
			}
		}
		werr := d.update(&c, failed(api.Trunc(strings.ToValidUTF8(launchFailed+err.Error(), "?"), 1000)))
		if werr != nil {
			// The shortest record that says so (roomFor left room for
			// the long one: this is a store that refuses writes).
			werr = d.update(&c, failed(launchFailed+"see the daemon's log"))
		}
		if werr != nil {
			// Never left running with no process: a restarted daemon
			// could only keep it, unverifiable, for good. Nothing of
			// the launch runs; the claim goes.
			if derr := d.st.Delete(c.ID); derr != nil && !errors.Is(derr, store.ErrNotFound) {
				d.storeFailed("delete claim "+c.ID, derr)
				return api.Claim{}, fmt.Errorf("%w; and %w; and deleting it: %w", err, werr, storeErr(derr))
			}
			d.claims.del(c.ID)
			if outPath != "" {
				d.discardOutput(c.ID, outPath)
			}
			d.log.Error("launch of "+c.ID+" failed and its claim could not record it: claim deleted", werr)
			return api.Claim{}, fmt.Errorf("%w; and %w", err, werr)
		}
		d.pruneFailed(p.Share())
		return api.Claim{}, err
	}

	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return fail(err)
	}
	defer devnull.Close()
	out, errf := devnull, devnull
	if kind == store.Job {
		if err := os.MkdirAll(filepath.Dir(outPath), 0o711); err != nil {
			return fail(err)
		}
		// The job's user's alone (STATE_DIR/jobs is 0711: opened by
		// name): with its group's read bit, users sharing a primary
		// group read each other's output, the id being in the job's
		// /proc/PID/cgroup for anyone to see. Root's, the user given
		// it by an ACL entry (jobout.GiveTo): an owner may lease it.
		// The daemon takes it back when it lets go of it
		// (jobout.Discard) or finds it linked elsewhere (jobout.Bound).
		f, err := os.OpenFile(outPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_EXCL, 0o600)
		if err != nil {
			return fail(err)
		}
		defer f.Close()
		if id.uid != 0 {
			if _, err := jobout.GiveTo(int(f.Fd()), id.uid, id.gid); err != nil {
				return fail(err)
			}
		}
		out, errf = f, f
	}

	// In the caller's root and sandbox namespaces: a chroot, a bind
	// mount of /, a sandbox's mounts, network, IPC and host name confine
	// the workload as they do the caller, who would otherwise launch its
	// way out of them.
	attr := spawn.Attr{Dir: r.Cwd, Files: [3]*os.File{devnull, out, errf}, CgroupFD: -1, Root: bnd.root, Namespaces: bnd.namespaces,
		Caller: bnd.caller}
	// A workload run as its caller takes the caller's groups even as
	// root: without credentials root's caller's job had the daemon's.
	if os.Geteuid() == 0 && (id.uid != 0 || id.gid != 0 || id.callers) {
		attr.Cred = &syscall.Credential{Uid: id.uid, Gid: id.gid, Groups: id.groups}
		if id.groups == nil {
			attr.Cred.Groups = []uint32{id.gid}
		}
	}
	cgPath, cgFd, cgErr := d.cg.create(c.ID)
	cgReason := ""
	if cgErr != nil {
		cgReason, cgPath = cgErr.Error(), ""
	} else {
		defer unix.Close(cgFd)
		attr.CgroupFD = cgFd
	}
	spec := spawn.Spec{Argv: r.Argv, Env: env, Path: path, Limits: bnd.limits, NoNewPrivs: c.NoNewPrivs,
		Umask: &bnd.umask, Nice: bnd.nice, LoginUID: bnd.loginUID, Policy: bnd.policy, IOPrio: bnd.ioprio,
		OOMScoreAdj: bnd.oomScoreAdj, Affinity: bnd.affinity, SeccompFrom: bnd.seccompFrom,
		CoredumpFilter: bnd.coredumpFilter}
	var tok token.Token
	start := func() (spawn.Process, error) {
		// The reaper waits until the child is known and its token read.
		d.reapMu.Lock()
		locked := true
		defer func() {
			if locked {
				d.reapMu.Unlock()
			}
		}()
		return spawn.Start(spec, attr, func(sp spawn.Process) error {
			var terr error
			tok, terr = tokenFromPidfd(sp.Pidfd, sp.Pid, d.boot)
			d.mu.Lock()
			d.children[sp.Pid] = c.ID
			d.starting[c.ID] = nil
			d.mu.Unlock()
			d.reapMu.Unlock()
			locked = false
			if terr != nil {
				return fmt.Errorf("reading the new process's token: %w", terr)
			}
			// The root is stored before the shim may exec: a daemon
			// that stops from here on finds it by its token at the next
			// start, and one that stopped before left a shim that exits
			// without exec when its spec pipe closes. Stored after the
			// exec, a stop in between left the workload's whole tree
			// running under a claim that said it never started; a
			// failed write killed the root and left its children.
			return d.update(&c, func(x *store.Claim) {
				now := d.now()
				x.Pid, x.Token, x.Pgid, x.Cgroup, x.OutputPath = sp.Pid, tok, sp.Pid, cgPath, outPath
				if x.WallClock > 0 {
					x.Deadline = now.Add(x.WallClock)
				}
				reason := "launched by the supervisor; token read from the spawn's pidfd"
				if cgPath == "" && cgReason != "" {
					reason += "; no cgroup: " + cgReason
				}
				x.LastVerdict = &store.Verdict{Result: verdict.Owned, Reason: api.Trunc(reason, 1000), Mechanism: "pidfd", At: now}
			})
		})
	}
	defer func() {
		d.mu.Lock()
		delete(d.starting, c.ID)
		d.mu.Unlock()
	}()
	// Taken before the spawn: what the source loses from here on may
	// hide the workload's exec from the graph (exitBeforeExec).
	lost := d.losses()
	sp, err := start()
	if err != nil && sp.Pid == 0 && attr.CgroupFD >= 0 {
		// The cgroup refused the fork (a controller, a permission): go
		// without it.
		cgReason = "clone into cgroup: " + err.Error()
		os.Remove(cgPath)
		cgPath, attr.CgroupFD = "", -1
		sp, err = start()
	}
	if sp.Pidfd >= 0 && sp.Pid != 0 {
		defer unix.Close(sp.Pidfd)
	}
	if err != nil {
		if cgPath != "" {
			go removeCgroup(cgPath)
		}
		if errors.Is(err, spawn.ErrExec) {
			return fail(hideArgv0(badRequest("%v", err), r.Argv[0], c.Argv[0]))
		}
		if errors.Is(err, spawn.ErrCaller) {
			return fail(fmt.Errorf("%v: %w", err, api.ErrConflict))
		}
		if errors.Is(err, spawn.ErrSetup) {
			return fail(fmt.Errorf("%v: %w", err, api.ErrUnavailable))
		}
		return fail(hideArgv0(fmt.Errorf("start %s: %w", r.Argv[0], err), r.Argv[0], c.Argv[0]))
	}

	if d.execEnded != nil {
		d.execEnded(sp.Pid)
	}
	if ws, before := d.exitBeforeExec(c.ID, sp, tok, lost); before {
		if cgPath != "" {
			go removeCgroup(cgPath)
		}
		return fail(notRun(ws, spec.SeccompFrom > 0, r.Argv[0], c.Argv[0]))
	}
	d.admit(c.ID, sp.Pid, tok)
	if d.execDone != nil {
		d.execDone(c.ID, sp.Pid)
	}
	if env := d.startEnv(sp); env != nil {
		if err := d.update(&c, func(x *store.Claim) { x.Started = env }); err != nil {
			d.log.Error("recording what "+c.ID+"'s workload started with", err)
		}
	}
	// A root reaped during the launch left its status here.
	d.mu.Lock()
	early := d.starting[c.ID]
	delete(d.starting, c.ID)
	d.mu.Unlock()
	if early != nil {
		d.rootReaped(c.ID, sp.Pid, early.ws)
		if got, err := d.st.Get(c.ID); err == nil {
			c = got
		}
	}
	return d.view(c), nil
}

// notRun is the error of a launch whose process ended before its
// workload's exec, with status ws: under its caller's seccomp filters,
// which may kill or trap at execve, or killed there by another hand (its
// user, once it was the user's; the OOM killer). A conflict (409) either
// way: nothing ran, and it is no fault of the daemon's.
func notRun(ws syscall.WaitStatus, filtered bool, argv0, shown string) error {
	how := "ended"
	switch {
	case ws.Signaled():
		how = "was killed by " + unix.SignalName(ws.Signal())
	case ws.Exited():
		how = fmt.Sprintf("exited with code %d", ws.ExitStatus())
	}
	if filtered {
		// A trap's SIGSYS meets the shim's runtime, which exits 2.
		return fmt.Errorf("the workload did not run: its process %s before the exec, under the caller's seccomp filters, which may kill or trap execve: %w", how, api.ErrConflict)
	}
	return hideArgv0(fmt.Errorf("start %s: the workload did not run: its process %s before the exec: %w", argv0, how, api.ErrConflict), argv0, shown)
}

// holder binds the process a grant is to be bound to: the peer itself, or
// the instance the request names, which must verify now and belong to the
// peer's uid. The peer is bound at its pid only while the socket's own
// pidfd of it (callerAlive) says it has not exited: the pid is the one it
// had when it connected, and a peer that handed its connection on and
// exited left it to be reissued, which bound root's grant to a stranger
// (torn down when the stranger exited, kept while it lived).
func (d *Daemon) holder(ctx context.Context, p api.Peer, want *store.Instance) (*pidfd.Handle, error) {
	if want == nil {
		if p.Pid <= 0 {
			return nil, badRequest("binding needs the caller's pid, which the socket did not give")
		}
		gone := fmt.Errorf("caller %d exited before it could be bound: %w", p.Pid, api.ErrConflict)
		alive, done := callerAlive(ctx, p, d.boot)
		if alive == nil {
			return nil, gone
		}
		defer done()
		h, err := pidfd.Open(p.Pid, d.boot)
		if err != nil || h.Zombie() || !alive() {
			if h != nil {
				h.Close()
			}
			return nil, gone
		}
		return h, nil
	}
	hidden := d.hiddenAtAll(ctx, p, want.Pid)
	v, h := d.judge.Bind(want.Pid, want.Token)
	if hidden && (h == nil || !ownsProcess(p, h)) {
		if h != nil {
			h.Close()
		}
		return nil, errHiddenProcess(want.Pid)
	}
	if h == nil {
		return nil, fmt.Errorf("holder %d: %s (%s): %w", want.Pid, v.Result, v.Reason, api.ErrConflict)
	}
	if actions.Protected(want.Pid) {
		// Init, this daemon or an ancestor: its exit would never come,
		// or come with the daemon's (a CLI whose caller exited was
		// adopted by init and named it).
		h.Close()
		return nil, fmt.Errorf("holder %d is init, the supervisor daemon or one of its ancestors, whose exit is no caller's: %w", want.Pid, api.ErrConflict)
	}
	if !ownsProcess(p, h) {
		h.Close()
		return nil, forbidden("holder %d belongs to another user", want.Pid)
	}
	return h, nil
}

// claimErr is storeErr for the read of claim id a caller asked for: a
// claim that does not exist is said as one the caller may not see is
// ("claim ID: not found"), without the store's path.
func claimErr(id string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("claim %s: %w", id, api.ErrNotFound)
	}
	return storeErr(err)
}

func storeErr(err error) error {
	switch {
	case errors.Is(err, store.ErrFull):
		return fmt.Errorf("%v: %w", err, api.ErrUnavailable)
	case errors.Is(err, store.ErrTooLarge), errors.Is(err, store.ErrInvalid):
		return fmt.Errorf("%v: %w", err, api.ErrBadRequest)
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("%v: %w", err, api.ErrNotFound)
	case errors.Is(err, store.ErrExists):
		return fmt.Errorf("%v: %w", err, api.ErrConflict)
	}
	return err
}

// Admit implements api.Backend.
func (d *Daemon) Admit(ctx context.Context, p api.Peer, r *api.AdmitRequest) (cl api.Claim, err error) {
	defer func() {
		d.log.Request(logfeed.Request{Action: logfeed.ActionAdmitRequested, UID: p.UID, GID: p.GID, Pid: p.Pid,
			ClaimID: cl.ID, Owner: r.Owner, Kind: string(store.Grant), Target: r.Pid, TargetTok: r.Token, Err: err})
	}()
	if err := d.servesNow(ctx, p); err != nil {
		return api.Claim{}, err
	}
	hidden := d.hiddenAtAll(ctx, p, r.Pid)
	v, h := d.judge.Bind(r.Pid, r.Token)
	d.log.Verdict(v)
	if hidden && (h == nil || !ownsProcess(p, h)) {
		if h != nil {
			h.Close()
		}
		return api.Claim{}, errHiddenProcess(r.Pid)
	}
	if h == nil {
		return api.Claim{}, fmt.Errorf("process %d is %s (%s); only an OWNED instance is admitted: %w", r.Pid, v.Result, v.Reason, api.ErrConflict)
	}
	defer h.Close()
	if int(r.Pid) == os.Getpid() || r.Pid == 1 {
		return api.Claim{}, forbidden("pid %d is never admitted", r.Pid)
	}
	if !ownsProcess(p, h) {
		return api.Claim{}, forbidden("process %d belongs to another user", r.Pid)
	}
	tok := h.Token()
	// From the index: reading every claim from the store cost any user's
	// admit 6 ms of the daemon's CPU with 300 claims, and more with more.
	for id, t := range d.claims.openRoots(r.Pid) {
		if m, _ := token.Compare(t, tok); m == token.Same || m == token.Unproven {
			return api.Claim{}, fmt.Errorf("process %d is already claimed by %s: %w", r.Pid, id, api.ErrConflict)
		}
	}
	if err := d.heldByOthers(p, r.Pid, tok); err != nil {
		return api.Claim{}, err
	}
	argv := readCmdline(r.Pid, d.redact)
	now := time.Now()
	c := store.Claim{
		Kind: store.Grant, Owner: r.Owner, UID: p.UID, GID: p.GID, ShareUID: p.ShareUID, Argv: argv,
		Pid: r.Pid, Token: tok, Pgid: h.Stat().PGrp,
		LastVerdict: &store.Verdict{Result: v.Result, Reason: api.Trunc(v.Reason, 1000), Mechanism: v.Mechanism, At: now},
	}
	redactClaim(d.redact, &c, true)
	fitArgv(&c)
	if err := roomFor(&c, "", ""); err != nil {
		return api.Claim{}, err
	}
	if h.Exited() {
		return api.Claim{}, fmt.Errorf("process %d exited while being admitted: %w", r.Pid, api.ErrConflict)
	}
	if err := d.record(p, &c); err != nil {
		return api.Claim{}, err
	}
	d.index(&c)
	d.admit(c.ID, r.Pid, tok)
	return d.view(c), nil
}

// heldByOthers refuses, for a caller but root, a process that another
// uid's open claim holds: through birth lineage (the graph says which
// claim's root it descends from) or as a member recorded on the claim.
// An admit of one made it a root of the caller's and relabelled its
// subtree: its new children were recorded as the caller's members, and
// the same process was held by two claims, whichever the next start
// readopted first winning.
func (d *Daemon) heldByOthers(p api.Peer, pid int32, tok token.Token) error {
	if p.Root() {
		return nil
	}
	refuse := fmt.Errorf("process %d is held by another user's claim: %w", pid, api.ErrConflict)
	if root, _, ok := d.tr.Load().Graph().RootOf(pid, tok); ok {
		if m, known := d.claims.get(root); known && Open(m.state) && m.uid != p.UID {
			return refuse
		}
	}
	for _, id := range d.claims.memberClaims(pid, 0, true) {
		c, err := d.st.Get(id)
		if err == nil && !may(p, &c) && slices.ContainsFunc(c.Members, func(m store.Member) bool {
			return m.Pid == pid && sameInstance(m.Token, tok)
		}) {
			return refuse
		}
	}
	return nil
}

// readCmdline reads a process's argv, redacted by rules and then bounded
// and made valid UTF-8 for the store. It is a label, not evidence. The
// patterns see the arguments before the store's bounds cut them, and a
// vector longer than the 16 KiB read goes through ArgvCut: its last
// argument may be the start of a secret a pattern hides whole.
func readCmdline(pid int32, rules *redact.Rules) []string {
	const maxRead = 16 << 10
	f, err := os.Open(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxRead+1))
	if err != nil || len(b) == 0 {
		return nil
	}
	redactArgv := rules.Argv
	if len(b) > maxRead {
		b, redactArgv = b[:maxRead], rules.ArgvCut
	}
	parts, _ := redactArgv(strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"))
	if len(parts) > 256 {
		parts = parts[:256]
	}
	for i, s := range parts {
		parts[i] = api.Trunc(strings.ToValidUTF8(s, "\uFFFD"), 4000)
	}
	return parts
}

// maxRecord is the store's bound on a claim's record (the daemon opens it
// with the default limits): a write past it fails.
var maxRecord = store.DefaultLimits.MaxRecord

// Bounds of what the daemon's later writes of a claim put in its record,
// for roomFor. Reasons the daemon writes are its own words, numbers,
// tokens and errno texts, which JSON does not escape, except the reasons
// of a launch, which may quote the caller's argv[0] or cwd: those are
// counted at six bytes a byte (a control character's \u0001), the most
// any text takes.
const (
	// launchReason bounds the verdict reasons of Launch (api.Trunc).
	launchReason = 1000
	// laterReason bounds the verdict reasons and RetiredReason of the
	// executor (storeVerdict, reconcile_linux.go).
	laterReason = 2000
	// wordBytes bounds a mechanism's name and a release's cause.
	wordBytes = 64
)

// largest is c as its record may be at its largest after the daemon's
// later writes of it: every field those set at its widest (the root, the
// verdict, a release with both lists full, the exit, the retirement), the
// cgroup and output paths it will get, and what it was created with. A
// release list (instances) keeps items while their estimate, 64 bytes
// each above the token and reason, stays under instanceBytes, then adds
// to the last one a note of at most 50 bytes: one item of that whole
// estimate encodes to more than any list it keeps.
func largest(c store.Claim, cgroup, output string) store.Claim {
	at := time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.FixedZone("", -(12*3600+59*60)))
	tok := token.Token{Start: math.MaxUint64, Ino: math.MaxUint64, Prec: token.Ticks}
	for i := range tok.Boot {
		tok.Boot[i] = 0xff
	}
	if c.ID == "" {
		c.ID = store.NewID(c.Kind)
	}
	if c.CreatedAt.IsZero() {
		c.CreatedAt = at
	}
	if cgroup != "" {
		c.Cgroup = cgroup
	}
	if output != "" {
		c.OutputPath = output
	}
	c.Pid, c.Pgid, c.Token = math.MaxInt32, math.MaxInt32, tok
	c.State = store.Unverifiable // the longest word
	// 6,000 bytes encoded: more than laterReason's words, even escaped.
	reason := strings.Repeat("\x01", launchReason)
	word := strings.Repeat("x", wordBytes)
	c.LastVerdict = &store.Verdict{Result: verdict.Unverifiable, Reason: reason, Mechanism: word, At: at}
	list := []store.Instance{{Pid: math.MaxInt32, Token: tok, Reason: strings.Repeat("x", instanceBytes+64-len(tok.String()))}}
	c.Release = &store.Release{Dead: true, Escalated: true, Survivors: list, Unproven: list,
		SurvivorsTotal: math.MaxInt, UnprovenTotal: math.MaxInt, Ownership: verdict.Unverifiable, At: at, Cause: word}
	code := math.MinInt
	c.ExitCode, c.ExitSignal, c.EndedAt = &code, math.MinInt, at
	c.RetiredReason = strings.Repeat("x", laterReason)
	c.GraceUntil, c.Grace, c.Deadline = at, math.MaxInt64, at
	c.FollowedUp = true
	c.Rev, c.UpdatedAt = math.MaxUint64, at
	c.Started = &store.StartEnv{Umask: "0777", Nice: -20, Policy: "SCHED_DEADLINE", IOPrio: "best-effort/7",
		OOMScoreAdj: -1000, CPUs: strings.Repeat("9", store.MaxCPUsText), SeccompFilters: math.MinInt}
	return c
}

// roomFor refuses c, about to be stored, when its record would leave the
// store no room for the daemon's later writes of it (largest): a launch
// with 10,830 '<' in its argv was stored, and every later write of it
// failed, so it stayed running, against its user's quota, its process
// gone. The refusal is the caller's (400), not a store fault.
func roomFor(c *store.Claim, cgroup, output string) error {
	big := largest(*c, cgroup, output)
	n, err := store.RecordSize(&big)
	if err != nil {
		return badRequest("claim cannot be stored: %v", err)
	}
	if n > maxRecord {
		return badRequest("argv, cwd and owner too large for the claim store: with the room its later updates need, the claim's record would take %d bytes (limit %d; control characters take 6 bytes each)", n, maxRecord)
	}
	return nil
}

// fitArgv drops arguments from the end of c's argv, a label read from
// /proc, until c leaves the store room for its later writes (roomFor):
// 16 KiB of control characters would take 96 KiB.
func fitArgv(c *store.Claim) {
	big := largest(*c, "", "")
	n, err := store.RecordSize(&big)
	if err != nil || n <= maxRecord {
		return
	}
	for len(c.Argv) > 1 && n > maxRecord {
		last := c.Argv[len(c.Argv)-1]
		one, err := store.RecordSize(&store.Claim{Argv: []string{last}})
		two, err2 := store.RecordSize(&store.Claim{Argv: []string{last, last}})
		if err != nil || err2 != nil {
			break
		}
		n -= two - one // its quoted text and a comma
		c.Argv = c.Argv[:len(c.Argv)-1]
	}
}

// launchFailed starts the reason of a launch that failed; the index counts
// such claims against QuotaFailed.
const launchFailed = "launch failed: "

// quota refuses a claim that would take a uid past its quotas:
// live claims and stored bytes. Over quota is a 429, never a store failure
// that would refuse everyone's writes.
func (d *Daemon) quota(p api.Peer, c *store.Claim) error {
	open, bytes, _ := d.claims.usage(p.Share())
	switch {
	case d.cfg.QuotaClaims > 0 && open >= d.cfg.QuotaClaims:
		return fmt.Errorf("uid %d holds %d live claims (quota %d): %w", p.Share(), open, d.cfg.QuotaClaims, api.ErrQuota)
	case d.cfg.QuotaBytes > 0 && bytes+claimBytes(c) > d.cfg.QuotaBytes:
		return fmt.Errorf("uid %d's claims store %d bytes; this one would take it past its quota of %d: %w", p.Share(), bytes, d.cfg.QuotaBytes, api.ErrQuota)
	}
	return nil
}

// record stores the new claim c and indexes it, within p's quota. The
// check and the record are one step for a caller other than root
// (quotaMu): a uid's concurrent launches (up to its 16 connections) each
// passed the check before any was recorded, and together went past it.
func (d *Daemon) record(p api.Peer, c *store.Claim) error {
	if !p.Root() {
		d.quotaMu.Lock()
		defer d.quotaMu.Unlock()
		if err := d.quota(p, c); err != nil {
			return err
		}
		if err := d.storeRoom(); err != nil {
			return err
		}
	}
	if err := d.st.Put(c); err != nil {
		d.storeFailed("record claim", err)
		return storeErr(err)
	}
	d.claims.set(c)
	return nil
}

// storeShareOf4 is the quarters of the store's file that new claims of
// callers other than root may fill. Past it, their launches and
// admissions are refused (503) until finished claims are pruned (retain,
// pruneForRoom): the rest is kept for root's claims and for the daemon's
// writes of the claims it holds (state changes, members, exits, release
// records), whatever the users' quotas add up to.
const storeShareOf4 = 3

// storeRoom refuses a new claim of a caller other than root when the
// store is past storeShareOf4 quarters full. A store that cannot say
// refuses nothing here: its Put reports the fault.
func (d *Daemon) storeRoom() error {
	used, limit, err := d.st.Usage()
	if err != nil || used*4 < limit*storeShareOf4 {
		return nil
	}
	return fmt.Errorf("the claims store is %d%% full (%d of %d MiB); until finished claims are pruned (the next reap pass drops the oldest of the users storing the most) only root's claims are taken: %w",
		used*100/limit, used>>20, limit>>20, api.ErrUnavailable)
}

// pruneFailed deletes uid's oldest failed launches beyond QuotaFailed.
func (d *Daemon) pruneFailed(uid uint32) {
	_, _, failed := d.claims.usage(uid)
	for len(failed) > d.cfg.QuotaFailed {
		c, err := d.st.Get(failed[0])
		if err == nil {
			d.drop(c)
		}
		failed = failed[1:]
	}
}

func kindOf(detach bool) store.Kind {
	if detach {
		return store.Job
	}
	return store.Grant
}
