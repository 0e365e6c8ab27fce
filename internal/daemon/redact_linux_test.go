package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/local"
	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/redact"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/testenv"
	"github.com/procsupervisor/supervisor/internal/token"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

func rules(t testing.TB, pats ...string) *redact.Rules {
	t.Helper()
	r, err := redact.Parse(pats)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRedactClaim: a fresh argv is redacted in full; one read back from
// the store is redacted again without changing what a marker stands in.
func TestRedactClaim(t *testing.T) {
	tests := []struct {
		name        string
		pats        []string
		argv        []string
		fresh       bool
		want        []string
		wantChanged bool
	}{
		{"no rules", nil, []string{"db", "--password=x"}, true, []string{"db", "--password=x"}, false},
		{"no match", []string{"--password=*"}, []string{"db", "-v"}, true, []string{"db", "-v"}, false},
		{"match", []string{"--password=*"}, []string{"db", "--password=x"}, true, []string{"db", "--password=[REDACTED]"}, true},
		{"fresh: a marker-like argument is matched too", []string{`x\=*`}, []string{"x=[REDACTED]"}, true, []string{"[REDACTED]"}, true},
		{"stored, redacted before", []string{"--password=*"}, []string{"db", "--password=[REDACTED]"}, false, []string{"db", "--password=[REDACTED]"}, false},
		{"stored: never into another form", []string{`--password=\[*`}, []string{"--password=[REDACTED]"}, false, []string{"--password=[REDACTED]"}, false},
		{"stored, pattern added since", []string{"-p *"}, []string{"--password=[REDACTED]", "-p", "y"}, false, []string{"--password=[REDACTED]", "-p", "[REDACTED]"}, true},
		{"stored before any pattern", []string{"-p *"}, []string{"mysql", "-p", "y"}, false, []string{"mysql", "-p", "[REDACTED]"}, true},
	}
	for _, tt := range tests {
		c := store.Claim{Argv: slices.Clone(tt.argv)}
		changed := redactClaim(rules(t, tt.pats...), &c, tt.fresh)
		if changed != tt.wantChanged || !slices.Equal(c.Argv, tt.want) {
			t.Errorf("%s: redactClaim(%q, fresh %v) = %v, argv %q; want %v, %q",
				tt.name, tt.argv, tt.fresh, changed, c.Argv, tt.wantChanged, tt.want)
		}
	}
}

// TestRedactClaimReasons: a claim stored before a pattern hid its
// argv[0] (a failed launch of a secret-named program) has the reasons
// that quote it rewritten too, and the verdict it shares is not changed
// in place.
func TestRedactClaimReasons(t *testing.T) {
	v := &store.Verdict{Reason: "launch failed: start ghp_s3cret: no such file"}
	c := store.Claim{Argv: []string{"ghp_s3cret", "-v"}, LastVerdict: v, RetiredReason: "ghp_s3cret exited"}
	if !redactClaim(rules(t, "ghp_*"), &c, false) {
		t.Fatal("redactClaim changed nothing")
	}
	for what, s := range map[string]string{"argv[0]": c.Argv[0], "verdict": c.LastVerdict.Reason, "retired": c.RetiredReason} {
		if strings.Contains(s, "s3cret") || !strings.Contains(s, "[REDACTED]") {
			t.Errorf("%s after the rewrite: %q, want the secret hidden", what, s)
		}
	}
	if !strings.Contains(v.Reason, "ghp_s3cret") {
		t.Errorf("the shared verdict was changed in place: %q", v.Reason)
	}
}

func TestHideArgv0(t *testing.T) {
	base := errors.New("exec ghp_s3cret: no such file")
	tests := []struct {
		err           error
		real, shown   string
		want          string
		keepsSentinel bool
	}{
		{base, "ghp_s3cret", "[REDACTED]", "exec [REDACTED]: no such file", true},
		{base, "ghp_s3cret", "ghp_s3cret", "exec ghp_s3cret: no such file", true},
		{base, "other", "[REDACTED]", "exec ghp_s3cret: no such file", true},
		{nil, "x", "y", "", false},
	}
	for _, tt := range tests {
		got := hideArgv0(tt.err, tt.real, tt.shown)
		if tt.err == nil {
			if got != nil {
				t.Errorf("hideArgv0(nil) = %v", got)
			}
			continue
		}
		if got.Error() != tt.want || errors.Is(got, base) != tt.keepsSentinel {
			t.Errorf("hideArgv0(%q, %q, %q) = %q (Is %v), want %q", tt.err, tt.real, tt.shown, got, errors.Is(got, base), tt.want)
		}
	}
}

// TestIntegrationLaunchRedactsClaim: a launch with a secret in its argv
// runs the workload with the real argument (it writes its argv to a
// file), and the stored claim, its view and every log line hold only the
// redacted one. A launch whose argv[0] is the secret and cannot exec
// does not put it in the stored reason or the error either.
func TestIntegrationLaunchRedactsClaim(t *testing.T) {
	h := newHarness(t)
	h.d.redact = rules(t, "--password=*", "ghp_*")
	secret := "s3cret-" + strings.ReplaceAll(t.Name(), "/", "-")
	got := filepath.Join(t.TempDir(), "argv")
	p := api.Peer{Pid: int32(os.Getpid())}
	cl, err := h.d.Launch(context.Background(), p, &api.LaunchRequest{
		Argv: []string{"/bin/sh", "-c", `printf '%s\n' "$@" > "$0.tmp" && mv "$0.tmp" "$0"`, got, "--password=" + secret}})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() bool { _, err := os.Stat(got); return err == nil }, "the workload did not write its argv")
	if b, _ := os.ReadFile(got); !strings.Contains(string(b), "--password="+secret) {
		t.Errorf("the workload got %q, want its real argument", b)
	}
	want := []string{"/bin/sh", "-c", `printf '%s\n' "$@" > "$0.tmp" && mv "$0.tmp" "$0"`, got, "--password=[REDACTED]"}
	if !slices.Equal(cl.Argv, want) || !cl.ArgsRedacted {
		t.Errorf("Launch view: argv %q redacted %v, want %q true", cl.Argv, cl.ArgsRedacted, want)
	}
	c, err := h.st.Get(cl.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Argv, want) {
		t.Errorf("stored: argv %q, want %q", c.Argv, want)
	}

	_, err = h.d.Launch(context.Background(), p, &api.LaunchRequest{Argv: []string{"ghp_" + secret, "x"}})
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Errorf("Launch of a missing ghp_ program: %v, want an error without the secret", err)
	}
	cs, err := h.st.List(store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		if c.LastVerdict != nil && strings.Contains(c.LastVerdict.Reason, secret) || slices.ContainsFunc(c.Argv, func(a string) bool { return strings.Contains(a, secret) }) {
			t.Errorf("stored claim %s holds the secret: %+v", c.ID, c)
		}
	}
	h.lg.Close(context.Background())
	if strings.Contains(h.out.b.String(), secret) {
		t.Errorf("the log feed holds the secret:\n%s", h.out.b.String())
	}
}

// TestIntegrationAdmitRedactsClaim: an admitted process's command line,
// read from /proc, is stored and shown redacted.
func TestIntegrationAdmitRedactsClaim(t *testing.T) {
	h := newHarness(t)
	h.d.redact = rules(t, "--password=*")
	cmd := testenv.Start(t, "/bin/sh", "-c", "sleep 600; :", "sh", "--password=hunter2")
	pid := int32(cmd.Process.Pid)
	// Start returns once exec has closed the child's descriptors, before
	// the kernel has set the new image's arguments: until then its
	// cmdline reads empty (the admit then records none).
	testenv.Eventually(t, 10*time.Second, func() bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		return len(b) > 0
	}, "pid %d: no command line", pid)
	tok, err := local.ReadToken(context.Background(), pid)
	if err != nil {
		t.Fatal(err)
	}
	var cl api.Claim
	testenv.EventuallyNil(t, 10*time.Second, func() (err error) {
		cl, err = h.d.Admit(context.Background(), api.Peer{Pid: int32(os.Getpid())}, &api.AdmitRequest{Pid: pid, Token: tok})
		return err
	}, "admit %d", pid)
	want := []string{"/bin/sh", "-c", "sleep 600; :", "sh", "--password=[REDACTED]"}
	c, err := h.st.Get(cl.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cl.Argv, want) || !cl.ArgsRedacted || !slices.Equal(c.Argv, want) {
		t.Errorf("Admit: view %q (redacted %v), stored %q; want %q, redacted", cl.Argv, cl.ArgsRedacted, c.Argv, want)
	}
}

// TestIntegrationOldClaimRedacted: a claim stored unredacted (a state
// directory written before the patterns, or before this change) is
// shown redacted and marked; Run's store rewrite is tested in
// internal/store (TestRewrite) and cmd/supervisor.
func TestIntegrationOldClaimRedacted(t *testing.T) {
	h := newHarness(t)
	old := store.Claim{Kind: store.Grant, Argv: []string{"db", "--password=hunter2"}, CreatedAt: time.Now()}
	if err := h.st.Put(&old); err != nil {
		t.Fatal(err)
	}
	h.d.redact = rules(t, "--password=*")
	want := []string{"db", "--password=[REDACTED]"}
	c, err := h.st.Get(old.ID)
	if err != nil {
		t.Fatal(err)
	}
	if v := h.d.view(c); !slices.Equal(v.Argv, want) || !v.ArgsRedacted {
		t.Errorf("view of an unredacted stored claim: %q %v, want %q true", v.Argv, v.ArgsRedacted, want)
	}
	if v := h.d.view(c); !slices.Equal(c.Argv, []string{"db", "--password=hunter2"}) || v.Argv[1] == c.Argv[1] {
		t.Errorf("view changed the claim it was given: %q", c.Argv)
	}
}

// TestIntegrationTreeRedacted: the daemon's tree carries each live
// process's arguments, read for that instance and redacted.
func TestIntegrationTreeRedacted(t *testing.T) {
	h := newHarness(t)
	h.d.redact = rules(t, "--password=*")
	cmd := testenv.Start(t, "/bin/sh", "-c", "sleep 600; :", "sh", "--password=hunter2")
	pid := int32(cmd.Process.Pid)
	want := []string{"/bin/sh", "-c", "sleep 600; :", "sh", "--password=[REDACTED]"}
	// The tracker may see the fork before the child has exec'd sh: its
	// arguments are then the test binary's, or none mid-exec. Wait for
	// the exec, then check.
	var nodes []api.TreeNode
	testenv.EventuallyNil(t, 10*time.Second, func() (err error) {
		nodes, _, err = h.d.Tree(context.Background(), api.Peer{}, pid, token.Token{})
		if err == nil && (len(nodes) == 0 || len(nodes[0].Args) != len(want)) {
			err = fmt.Errorf("%d: %+v so far", pid, nodes)
		}
		return err
	}, "the tracker never saw %d exec sh", pid)
	if len(nodes) == 0 || nodes[0].Pid != pid || !slices.Equal(nodes[0].Args, want) || !nodes[0].ArgsRedacted {
		t.Fatalf("Tree(%d) = %+v, want the root with args %q, redacted", pid, nodes, want)
	}
	// Another user is shown root's command lines only if /proc shows
	// them to it.
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	// The caller: a process of its own, whose /proc the daemon reads too.
	caller := exec.Command("sleep", "600")
	caller.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := caller.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { caller.Process.Kill(); caller.Wait() })
	nodes, _, err = h.d.Tree(context.Background(), api.Peer{UID: 65534, GID: 65534, Pid: int32(caller.Process.Pid)}, pid, token.Token{})
	if err != nil || len(nodes) == 0 || (nodes[0].Args == nil) != procHidesPids(mi) {
		t.Errorf("Tree(%d) as uid 65534 = %+v, %v; want arguments only if /proc shows them (hides: %v)", pid, nodes, err, procHidesPids(mi))
	}
}

func TestProcHidesPids(t *testing.T) {
	const (
		root = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
		open = "25 22 0:22 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw\n"
	)
	tests := []struct {
		name, in string
		want     bool
	}{
		{"plain", root + open, false},
		{"hidepid=2", root + "25 22 0:22 / /proc rw - proc proc rw,hidepid=2\n", true},
		{"hidepid=invisible", root + "25 22 0:22 / /proc rw - proc proc rw,hidepid=invisible,subset=pid\n", true},
		{"hidepid=0", root + "25 22 0:22 / /proc rw - proc proc rw,hidepid=0\n", false},
		{"hidepid=off", root + "25 22 0:22 / /proc rw - proc proc rw,hidepid=off\n", false},
		{"no /proc", root, true},
		{"proc elsewhere only", root + "25 22 0:22 / /mnt/proc rw - proc proc rw\n", true},
		{"the last mount wins", root + open + "26 25 0:23 / /proc rw - proc proc rw,hidepid=1\n", true},
		{"open over hidden", root + "25 22 0:22 / /proc rw - proc proc rw,hidepid=1\n" + open, false},
		{"tmpfs over /proc", root + open + "26 25 0:23 / /proc rw - tmpfs tmpfs rw\n", true},
		{"truncated", root + "25 22 0:22 / /proc rw - proc\n", true},
		{"empty", "", true},
	}
	for _, tt := range tests {
		if got := procHidesPids([]byte(tt.in)); got != tt.want {
			t.Errorf("%s: procHidesPids = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// FuzzProcHidesPids: any mountinfo is read without a panic, and the last
// mount at /proc decides: a plain proc never hides, a proc with hidepid=2
// or another filesystem always does.
func FuzzProcHidesPids(f *testing.F) {
	f.Add([]byte("25 22 0:22 / /proc rw - proc proc rw,hidepid=2\n"))
	f.Add([]byte("25 22 0:22 / /proc rw - proc proc rw\n26 25 0:23 / /proc rw - tmpfs tmpfs rw"))
	f.Fuzz(func(t *testing.T, mi []byte) {
		for _, last := range []struct {
			line  string
			hides bool
		}{
			{"9 1 0:5 / /proc rw - proc proc rw\n", false},
			{"9 1 0:5 / /proc rw - proc proc rw,hidepid=2\n", true},
			{"9 1 0:5 / /proc rw - tmpfs tmpfs rw\n", true},
		} {
			if got := procHidesPids(append(append(slices.Clip(mi), '\n'), last.line...)); got != last.hides {
				t.Errorf("after %q, the last mount %q: hides %v, want %v", mi, last.line, got, last.hides)
			}
		}
	})
}

// TestIntegrationTreeBounded: a tree answer lists at most the daemon's
// node bound, each node after its parent, and counts the descendants left
// out on its first node; the walk's cost is what Tree reports (what the
// API charges), and command lines past the bytes bound are not read.
// Before, one answer listed every descendant with its command line: a
// user's 5,000 processes of 4 KB arguments made 120 MB answers.
func TestIntegrationTreeBounded(t *testing.T) {
	h := newHarness(t)
	h.d.treeNodes, h.d.treeArgsMax = 5, 64
	sh := exec.Command("/bin/sh", "-c", "for i in 1 2 3 4 5 6 7 8 9 10; do sleep 600 & done; wait")
	sh.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // killed as a group
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-sh.Process.Pid, syscall.SIGKILL); sh.Process.Kill(); sh.Wait() })
	pid := int32(sh.Process.Pid)
	var nodes []api.TreeNode
	var walked int
	testenv.EventuallyNil(t, 10*time.Second, func() (err error) {
		nodes, walked, err = h.d.Tree(context.Background(), api.Peer{}, pid, token.Token{})
		switch {
		case err != nil:
		case len(nodes) == 0:
			err = fmt.Errorf("no nodes yet")
		case nodes[0].DescendantsCut != 6:
			err = fmt.Errorf("%d nodes, %d cut so far", len(nodes), nodes[0].DescendantsCut)
		}
		return err
	}, "the tracker never saw the shell's 10 sleeps")
	if len(nodes) != 5 || walked != 5 || nodes[0].Pid != pid {
		t.Fatalf("Tree = %d nodes (first %d), walked %d; want 5 from %d, 5 walked", len(nodes), nodes[0].Pid, walked, pid)
	}
	seen := map[int32]bool{pid: true}
	withArgs := 0
	for _, n := range nodes[1:] {
		if !seen[n.PPid] {
			t.Errorf("node %d listed before its parent %d", n.Pid, n.PPid)
		}
		seen[n.Pid] = true
	}
	for _, n := range nodes {
		if n.Args != nil {
			withArgs++
		}
	}
	// "/bin/sh -c <script>" is 77 bytes: past the 64-byte bound at once.
	if withArgs != 1 || nodes[0].Args == nil {
		t.Errorf("%d nodes with command lines, want only the first (the bound is 64 bytes)", withArgs)
	}
}

// TestIntegrationCallerMountinfoBounded: whether /proc hides other users'
// processes from a caller is the daemon's own answer for a caller in its
// mount namespace and root (its mount table not read), is read from the
// caller's table when it has its own, and is "hidden" when that table is
// longer than maxMountinfo. Before, any user could make its own mount
// namespace's table megabytes long and have the daemon read it whole at
// every verify, tree and stream: seconds of kernel time and hundreds of
// MiB of the daemon's memory per request.
func TestIntegrationCallerMountinfoBounded(t *testing.T) {
	h := newHarness(t)
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	own := procHidesPids(mi)
	if own {
		testenv.Skip(t, "/proc hides pids here: every caller is hidden from, whatever its table")
	}
	dir := t.TempDir()
	// A caller in a mount namespace of its own with n tmpfs mounts at
	// long names (about 300 bytes of table each), then uid 65534.
	caller := func(n int) int32 {
		script := `d=$1; n=$2; i=0
while [ $i -lt $n ]; do
	m=$d/` + strings.Repeat("m", 200) + `$i
	mkdir -p $m && mount -t tmpfs -o size=4k none $m || exit 1
	i=$((i+1))
done
echo ready > $d/ready.$n
exec setpriv --reuid=65534 --regid=65534 --clear-groups sleep 600`
		cmd := testenv.Start(t, "unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", dir, fmt.Sprint(n))
		testenv.EventuallyNil(t, 60*time.Second, func() error {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", cmd.Process.Pid))
			if err != nil || string(b) != "sleep\n" {
				return fmt.Errorf("comm %q, %v", b, err)
			}
			return nil
		}, "the caller with %d mounts never became sleep", n)
		return int32(cmd.Process.Pid)
	}
	nobody := exec.Command("sleep", "600")
	nobody.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := nobody.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nobody.Process.Kill(); nobody.Wait() })
	few, many := caller(3), caller(maxMountinfo/300+200)
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", many)); err != nil || len(b) <= maxMountinfo {
		t.Fatalf("the long table is %d bytes (%v), want over %d", len(b), err, maxMountinfo)
	}
	for _, tt := range []struct {
		name string
		pid  int32
		want bool
	}{
		{"in the daemon's world", int32(nobody.Process.Pid), own},
		{"a table of its own", few, false},
		{"a table too long", many, true},
		{"no such caller", 0, true},
	} {
		p := api.Peer{UID: 65534, GID: 65534, Pid: tt.pid}
		if got := h.d.procHiddenFrom(context.Background(), p); got != tt.want {
			t.Errorf("%s (pid %d): procHiddenFrom = %v, want %v", tt.name, tt.pid, got, tt.want)
		}
	}
}

// TestIntegrationVerifyGoneHidden: to a caller whose /proc hides other
// users' processes, a verify of an exited process of another user says
// GONE with the same reason whatever the token: before, "exit observed
// at ..." came only for the exited instance's own start time, an oracle
// for it one tick at a time.
func TestIntegrationVerifyGoneHidden(t *testing.T) {
	h := newHarness(t)
	// The caller: nobody, in a mount namespace whose /proc hides pids.
	caller := testenv.Start(t, "unshare", "-m", "--propagation", "private", "sh", "-c",
		"mount -t proc -o hidepid=2 proc /proc && exec setpriv --reuid=65534 --regid=65534 --clear-groups sleep 600")
	testenv.EventuallyNil(t, 10*time.Second, func() error {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", caller.Process.Pid))
		if err != nil || string(b) != "sleep\n" {
			return fmt.Errorf("comm %q, %v", b, err)
		}
		return nil
	}, "the caller never became sleep")
	p := api.Peer{UID: 65534, GID: 65534, Pid: int32(caller.Process.Pid)}
	// Root's process, its exit observed.
	victim := exec.Command("sleep", "600")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	pid := int32(victim.Process.Pid)
	hd, err := pidfd.Open(pid, h.boot)
	if err != nil {
		t.Fatal(err)
	}
	tok := hd.Token()
	hd.Close()
	victim.Process.Kill()
	victim.Wait()
	testenv.EventuallyNil(t, 10*time.Second, func() error {
		if v := h.d.judge.Judge(pid, tok); v.Result != verdict.Gone || !strings.Contains(v.Reason, "exit") {
			return fmt.Errorf("root's verdict %v so far", v)
		}
		return nil
	}, "the daemon never observed %d's exit", pid)
	other := tok
	other.Start++
	var reasons []string
	for _, tk := range []token.Token{tok, other} {
		v, err := h.d.Verify(context.Background(), p, &api.ClaimRequest{Pid: pid, Token: tk})
		if err != nil || v.Result != verdict.Gone || v.Observed != (token.Token{}) {
			t.Fatalf("Verify(%d, %v) as nobody = %+v, %v; want GONE, nothing observed", pid, tk, v, err)
		}
		reasons = append(reasons, v.Reason)
	}
	if reasons[0] != reasons[1] {
		t.Errorf("a hidden caller's verify of the exited instance and of another tick differ: %q, %q", reasons[0], reasons[1])
	}
}
