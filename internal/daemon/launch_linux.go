package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/procfs"
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

// procIDs reads the real uid and the groups of a process from
// /proc/PID/status.
func procIDs(pid int32) (uid uint32, groups []uint32, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, nil, err
	}
	found := false
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				v, err := strconv.ParseUint(f[0], 10, 32)
				if err != nil {
					return 0, nil, err
				}
				uid, found = uint32(v), true
			}
		}
		if rest, ok := strings.CutPrefix(line, "Groups:"); ok {
			for _, g := range strings.Fields(rest) {
				if v, err := strconv.ParseUint(g, 10, 32); err == nil {
					groups = append(groups, uint32(v))
				}
			}
		}
	}
	if !found {
		return 0, nil, errors.New("no Uid line")
	}
	return uid, groups, nil
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

// lookPath resolves a program name against the request's PATH.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := defaultPath
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", badRequest("%q not found in PATH", name)
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

// Launch implements api.Backend.
func (d *Daemon) Launch(ctx context.Context, p api.Peer, r *api.LaunchRequest) (api.Claim, error) {
	uid, gid := p.UID, p.GID
	var groups []uint32
	if r.UID != nil || r.GID != nil {
		if !p.Root() && ((r.UID != nil && *r.UID != p.UID) || (r.GID != nil && *r.GID != p.GID)) {
			return api.Claim{}, forbidden("only root may launch as another user")
		}
		if r.UID != nil {
			uid = *r.UID
		}
		if r.GID != nil {
			gid = *r.GID
		}
	} else if !p.Root() {
		if pu, gs, err := procIDs(p.Pid); err == nil && pu == p.UID {
			groups = gs
		}
	}
	kind := store.Grant
	if r.Detach {
		kind = store.Job
	}
	c := store.Claim{
		Kind: kind, Owner: r.Owner, UID: p.UID, GID: p.GID,
		Argv: r.Argv, Cwd: r.Cwd, WallClock: time.Duration(r.WallClock),
	}
	if r.Bind {
		h, err := d.holder(p, r.Holder)
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
	prog, err := lookPath(r.Argv[0], env)
	if err != nil {
		return api.Claim{}, err
	}
	if err := d.st.Put(&c); err != nil {
		d.storeFailed("record claim", err)
		return api.Claim{}, storeErr(err)
	}
	l := d.claimLock(c.ID)
	l.Lock()
	defer l.Unlock()

	fail := func(err error) (api.Claim, error) {
		now := d.now()
		if werr := d.update(&c, func(x *store.Claim) {
			x.State = store.Released
			x.Release = &store.Release{Dead: true, At: now}
			x.LastVerdict = &store.Verdict{Result: verdict.Gone, Reason: api.Trunc("launch failed: "+err.Error(), 1000), At: now}
		}); werr != nil {
			return api.Claim{}, fmt.Errorf("%w; and %w", err, werr)
		}
		return api.Claim{}, err
	}

	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return fail(err)
	}
	defer devnull.Close()
	out, errf := devnull, devnull
	var outPath string
	if kind == store.Job {
		dir := filepath.Join(d.cfg.StateDir, "jobs")
		if err := os.MkdirAll(dir, 0o711); err != nil {
			return fail(err)
		}
		outPath = filepath.Join(dir, c.ID+".out")
		f, err := os.OpenFile(outPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_EXCL, 0o640)
		if err != nil {
			return fail(err)
		}
		defer f.Close()
		f.Chown(int(uid), int(gid))
		out, errf = f, f
	}

	attr := &syscall.SysProcAttr{Setpgid: true}
	if uid != 0 || gid != 0 || os.Geteuid() != 0 {
		if os.Geteuid() == 0 {
			attr.Credential = &syscall.Credential{Uid: uid, Gid: gid, Groups: groups}
			if groups == nil {
				attr.Credential.Groups = []uint32{gid}
			}
		}
	}
	var cgPath, cgReason string
	cgFd := -1
	if kind == store.Grant || kind == store.Job {
		cgPath, cgFd, err = d.cg.create(c.ID)
		if err != nil {
			cgReason = err.Error()
			cgPath = ""
		} else {
			defer unix.Close(cgFd)
			attr.UseCgroupFD = true
			attr.CgroupFD = cgFd
		}
	}
	var pfd int = -1
	attr.PidFD = &pfd
	pa := &os.ProcAttr{Dir: r.Cwd, Env: env, Files: []*os.File{devnull, out, errf}, Sys: attr}

	d.reapMu.Lock()
	proc, err := os.StartProcess(prog, r.Argv, pa)
	if err != nil && attr.UseCgroupFD {
		// The cgroup refused us (a controller, a permission): go without.
		cgReason = "clone into cgroup: " + err.Error()
		os.Remove(cgPath)
		cgPath = ""
		attr.UseCgroupFD, attr.CgroupFD = false, 0
		pfd = -1
		proc, err = os.StartProcess(prog, r.Argv, pa)
	}
	if err != nil {
		d.reapMu.Unlock()
		if cgPath != "" {
			os.Remove(cgPath)
		}
		return fail(badRequest("start %s: %v", r.Argv[0], err))
	}
	pid := int32(proc.Pid)
	tok, terr := tokenFromPidfd(pfd, pid, d.boot)
	d.mu.Lock()
	d.children[pid] = c.ID
	d.mu.Unlock()
	d.reapMu.Unlock()
	proc.Release()
	if terr != nil {
		unix.PidfdSendSignal(pfd, unix.SIGKILL, nil, 0)
		unix.Close(pfd)
		return fail(fmt.Errorf("reading the new process's token: %w", terr))
	}

	now := time.Now()
	err = d.st.Update(c.ID, func(x *store.Claim) error {
		x.Pid, x.Token, x.Pgid, x.Cgroup, x.OutputPath = pid, tok, pid, cgPath, outPath
		if x.WallClock > 0 {
			x.Deadline = now.Add(x.WallClock)
		}
		reason := "launched by the supervisor; token read from the spawn's pidfd"
		if cgPath == "" && cgReason != "" {
			reason += "; no cgroup: " + cgReason
		}
		x.LastVerdict = &store.Verdict{Result: verdict.Owned, Reason: api.Trunc(reason, 1000), Mechanism: "pidfd", At: now}
		return nil
	})
	if err != nil {
		// A process the store does not know must not outlive this call.
		d.storeFailed("record started claim "+c.ID, err)
		unix.PidfdSendSignal(pfd, unix.SIGKILL, nil, 0)
		unix.Close(pfd)
		return fail(storeErr(err))
	}
	unix.Close(pfd)
	c, err = d.st.Get(c.ID)
	if err != nil {
		return api.Claim{}, storeErr(err)
	}
	d.index(&c)
	d.admit(c.ID, pid, tok)
	return api.ClaimOf(c), nil
}

// holder binds the process a grant is to be bound to: the peer itself, or
// the instance the request names, which must verify now and belong to the
// peer's uid.
func (d *Daemon) holder(p api.Peer, want *store.Instance) (*pidfd.Handle, error) {
	if want == nil {
		if p.Pid <= 0 {
			return nil, badRequest("binding needs the caller's pid, which the socket did not give")
		}
		h, err := pidfd.Open(p.Pid, d.boot)
		if err != nil || h.Zombie() {
			if h != nil {
				h.Close()
			}
			return nil, badRequest("caller %d exited before it could be bound", p.Pid)
		}
		return h, nil
	}
	v, h := d.judge.Bind(want.Pid, want.Token)
	if h == nil {
		return nil, fmt.Errorf("holder %d: %s (%s): %w", want.Pid, v.Result, v.Reason, api.ErrConflict)
	}
	if !ownsProcess(p, h) {
		h.Close()
		return nil, forbidden("holder %d belongs to another user", want.Pid)
	}
	return h, nil
}

func storeErr(err error) error {
	switch {
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
func (d *Daemon) Admit(ctx context.Context, p api.Peer, r *api.AdmitRequest) (api.Claim, error) {
	v, h := d.judge.Bind(r.Pid, r.Token)
	d.log.Verdict(v)
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
	existing, err := d.st.List(store.Filter{})
	if err != nil {
		return api.Claim{}, err
	}
	for _, e := range existing {
		if e.Pid == r.Pid && Open(e.State) {
			if m, _ := token.Compare(e.Token, tok); m == token.Same || m == token.Unproven {
				return api.Claim{}, fmt.Errorf("process %d is already claimed by %s: %w", r.Pid, e.ID, api.ErrConflict)
			}
		}
	}
	argv := readCmdline(r.Pid)
	now := time.Now()
	c := store.Claim{
		Kind: store.Grant, Owner: r.Owner, UID: p.UID, GID: p.GID, Argv: argv,
		Pid: r.Pid, Token: tok, Pgid: h.Stat().PGrp,
		LastVerdict: &store.Verdict{Result: v.Result, Reason: api.Trunc(v.Reason, 1000), Mechanism: v.Mechanism, At: now},
	}
	if h.Exited() {
		return api.Claim{}, fmt.Errorf("process %d exited while being admitted: %w", r.Pid, api.ErrConflict)
	}
	if err := d.st.Put(&c); err != nil {
		d.storeFailed("record claim", err)
		return api.Claim{}, storeErr(err)
	}
	d.index(&c)
	d.admit(c.ID, r.Pid, tok)
	return api.ClaimOf(c), nil
}

// readCmdline reads a process's argv, bounded and made valid UTF-8 for the
// store. It is a label, not evidence.
func readCmdline(pid int32) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(b) == 0 {
		return nil
	}
	if len(b) > 16<<10 {
		b = b[:16<<10]
	}
	parts := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	if len(parts) > 256 {
		parts = parts[:256]
	}
	for i, s := range parts {
		parts[i] = api.Trunc(strings.ToValidUTF8(s, "\uFFFD"), 4000)
	}
	return parts
}
