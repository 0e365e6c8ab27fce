package daemon

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/logfeed"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/testenv"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// TestIntegrationStoreKeptForRoot: past three quarters of the store's
// file, a user's launch is refused (503, saying the store is full) while
// root's is still taken. Before, users within their quotas filled the
// store and every launch failed, root's too, as a caller's bad request.
func TestIntegrationStoreKeptForRoot(t *testing.T) {
	h := newHarnessWith(t, store.Options{MaxFileSize: 1 << 20})
	fillStore(t, h, func() *store.Claim { return &store.Claim{Kind: store.Grant, State: store.Released} })
	nobody := nobodyCaller(t)
	_, err := h.d.Launch(context.Background(), nobody, &api.LaunchRequest{Argv: []string{"/bin/true"}, Cwd: "/"})
	if !errors.Is(err, api.ErrUnavailable) || !strings.Contains(err.Error(), "full") {
		t.Errorf("nobody's launch into a store 80%% full = %v, want 503, the store full", err)
	}
	root := api.Peer{Pid: int32(os.Getpid())}
	if _, err := h.d.Launch(context.Background(), root, &api.LaunchRequest{Argv: []string{"/bin/true"}, Cwd: "/"}); err != nil {
		t.Errorf("root's launch into a store 80%% full = %v, want it taken", err)
	}
}

// TestClaimBytesAsStored: a claim costs its owner's byte quota at least
// its record as stored, where a control character takes six bytes.
func TestClaimBytesAsStored(t *testing.T) {
	tests := []struct {
		name string
		argv []string
	}{
		{"plain", []string{"/bin/true", strings.Repeat("x", 3000)}},
		{"control characters", []string{"/bin/true", strings.Repeat("\x01", 3000)}},
		{"short", []string{"true"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := store.Claim{ID: "g-abcdefghijkl", Kind: store.Grant, Argv: tt.argv, Cwd: "/"}
			n, err := store.RecordSize(&c)
			if err != nil {
				t.Fatal(err)
			}
			if got := claimBytes(&c); got < int64(n) {
				t.Errorf("claimBytes = %d, want at least the record's %d bytes", got, n)
			}
		})
	}
}

// TestIntegrationStoreRoomPruned: users' finished claims fill the store
// past their share, one user's most. The next pass drops the oldest
// finished claims of the user storing the most until the store is back
// under eleven sixteenths, and nothing of another user's that stores
// little, nor root's, nor an open claim; a user's launch is then taken.
// Before, the store stayed full (and every user's launch refused) until
// the claims aged out, seven days later.
func TestIntegrationStoreRoomPruned(t *testing.T) {
	h := newHarnessWith(t, store.Options{MaxFileSize: 1 << 20})
	filler := strings.Repeat("f", 3000)
	put := func(uid uint32, state store.State) string {
		t.Helper()
		c := &store.Claim{Kind: store.Grant, State: state, UID: uid, Argv: []string{"/bin/true", filler}}
		if err := h.st.Put(c); err != nil {
			t.Fatalf("filling the store: %v", err)
		}
		return c.ID
	}
	var keep []string
	for range 3 {
		keep = append(keep, put(2000, store.Released), put(0, store.Released))
	}
	keep = append(keep, put(1000, store.Running))
	first := put(1000, store.Released)
	fillStore(t, h, func() *store.Claim { return &store.Claim{Kind: store.Grant, State: store.Released, UID: 1000} })
	h.d.retain()
	used, limit, err := h.st.Usage()
	if err != nil {
		t.Fatal(err)
	}
	if used*16 >= limit*11 {
		t.Errorf("after a pass the store holds %d of %d bytes, want under 11/16", used, limit)
	}
	for _, id := range keep {
		if _, err := h.st.Get(id); err != nil {
			t.Errorf("claim %s (another user's, root's, or open) was pruned: %v", id, err)
		}
	}
	if _, err := h.st.Get(first); err == nil {
		t.Errorf("the oldest finished claim of the user storing the most (%s) was kept", first)
	}
	if err := h.lg.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	pruned := map[string]bool{}
	for _, l := range h.out.lines(t) {
		ev, _ := l["event"].(map[string]any)
		sup, _ := l["supervisor"].(map[string]any)
		cl, _ := sup["claim"].(map[string]any)
		if ev["action"] == logfeed.ActionClaimPruned && cl != nil {
			id, _ := cl["id"].(string)
			pruned[id] = true
		}
	}
	if !pruned[first] {
		t.Errorf("no claim_pruned line for %s in the feed (lines for %d claims)", first, len(pruned))
	}
	for _, id := range keep {
		if pruned[id] {
			t.Errorf("a claim_pruned line for %s, which was kept", id)
		}
	}
	if _, err := h.d.Launch(context.Background(), nobodyCaller(t), &api.LaunchRequest{Argv: []string{"/bin/true"}, Cwd: "/"}); err != nil {
		t.Errorf("nobody's launch after the pass = %v, want it taken", err)
	}
}

// fillStore puts claims made by claim, each with 3,000 bytes of
// arguments, until the store is 80% full.
func fillStore(t *testing.T, h *harness, claim func() *store.Claim) {
	t.Helper()
	filler := strings.Repeat("f", 3000)
	for {
		used, limit, err := h.st.Usage()
		if err != nil {
			t.Fatal(err)
		}
		if used*5 >= limit*4 {
			return
		}
		c := claim()
		c.Argv = []string{"/bin/true", filler}
		if err := h.st.Put(c); err != nil {
			t.Fatalf("filling the store to 80%%: at %d of %d bytes: %v", used, limit, err)
		}
	}
}

// nobodyCaller starts a process of nobody's, whose limits and root a
// launch reads, and returns it as a caller; it is killed when the test
// ends.
func nobodyCaller(t *testing.T) api.Peer {
	t.Helper()
	caller := exec.Command("sleep", "600")
	caller.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := caller.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { caller.Process.Kill(); caller.Wait() })
	return api.Peer{UID: 65534, GID: 65534, Pid: int32(caller.Process.Pid)}
}

// TestIntegrationJudgeShortOfDescriptors: a pass, a release or a startup
// that cannot open a pidfd for want of descriptors decides nothing: a
// running job stays running (it was retired for good, its process left
// unsupervised), a grant is not marked unverifiable, and a release is
// answered 503, to be retried. Once descriptors are back, the same job is
// judged OWNED and kept.
func TestIntegrationJudgeShortOfDescriptors(t *testing.T) {
	h := newHarness(t)
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	grant := h.claim(t, cmd.Process.Pid, nil, 0)
	job := grant
	job.ID, job.Kind = "", store.Job
	if err := h.st.Put(&job); err != nil {
		t.Fatal(err)
	}
	h.d.claims.set(&job)
	for _, tc := range []struct {
		id   string
		trig Trigger
	}{{job.ID, Pass}, {job.ID, Startup}, {grant.ID, Pass}, {grant.ID, ReleaseAsked}} {
		var it api.ReportItem
		var err error
		testenv.WithoutFDs(t, func() {
			it, _, err = h.d.settle(context.Background(), tc.id, request{trigger: tc.trig})
		})
		if !errors.Is(err, api.ErrUnavailable) || it.Action != "failed" {
			t.Errorf("%s of %s short of descriptors = %+v, %v; want failed, 503", tc.trig, tc.id, it, err)
		}
		if got, _ := h.st.Get(tc.id); got.State != store.Running {
			t.Errorf("%s of %s short of descriptors left it %s, want running", tc.trig, tc.id, got.State)
		}
	}
	it, _, err := h.d.settle(context.Background(), job.ID, request{trigger: Pass})
	if err != nil || it.Verdict != verdict.Owned || it.Action != Keep.String() {
		t.Errorf("a pass with descriptors back = %+v, %v; want OWNED, kept", it, err)
	}
}

// TestIntegrationMembersShortOfDescriptors: a job whose root has gone
// keeps running while its cgroup holds a process; when the cgroup cannot
// be read for want of descriptors, the pass decides nothing (it would
// have finished the job, its member left running unsupervised), and the
// next pass, with descriptors back, keeps it running for its member.
func TestIntegrationMembersShortOfDescriptors(t *testing.T) {
	h := newHarness(t)
	c, _ := h.goneJobInCgroup(t)
	var it api.ReportItem
	var err error
	testenv.WithoutFDs(t, func() {
		it, _, err = h.d.settle(context.Background(), c.ID, request{trigger: Pass})
	})
	if !errors.Is(err, api.ErrUnavailable) || it.Action != "failed" {
		t.Errorf("a pass short of descriptors = %+v, %v; want failed, 503", it, err)
	}
	if got, _ := h.st.Get(c.ID); got.State != store.Running {
		t.Fatalf("a pass short of descriptors left the job %s, want running", got.State)
	}
	if it, _, err := h.d.settle(context.Background(), c.ID, request{trigger: Pass}); err != nil || it.Action != Keep.String() {
		t.Errorf("a pass with descriptors back = %+v, %v; want the job kept for its member", it, err)
	}
	if got, _ := h.st.Get(c.ID); got.State != store.Running {
		t.Errorf("the job is %s, want running while its member lives", got.State)
	}
}

// TestMembersStoreFailureSaid: a batch of members the store cannot write
// (a full disk) is a store failure, counted and logged as every other
// is, not only a member dropped: a review's job forked its members while
// another user filled the disk, and status said nothing of it.
func TestMembersStoreFailureSaid(t *testing.T) {
	h := newHarness(t)
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	c := h.claim(t, cmd.Process.Pid, nil, 0)
	m := store.Member{Pid: c.Pid + 1, Token: c.Token, Parent: c.Pid, ParentToken: c.Token}
	h.st.failAdd.Store(true)
	h.d.flushMembers(map[string][]store.Member{c.ID: {m}})
	if n := h.d.storeErrors.Load(); n != 1 {
		t.Errorf("a member batch the store could not write counted %d store errors, want 1", n)
	}
	if n := h.d.membersDropped.Load(); n != 1 {
		t.Errorf("%d members dropped, want 1", n)
	}
	h.st.failAdd.Store(false)
	// A claim gone meanwhile is no store failure.
	h.d.flushMembers(map[string][]store.Member{"g-gonegonegone": {m}})
	if n := h.d.storeErrors.Load(); n != 1 {
		t.Errorf("a batch for a claim gone meanwhile counted a store error (%d in all)", n)
	}
}

// TestIntegrationClosedClaimCgroupRemoved: a claim that ends by a way
// that does not tear it down (retired here) has its own cgroup removed
// once empty, as a released one has; before, each left an empty directory
// in the daemon's cgroup tree.
func TestIntegrationClosedClaimCgroupRemoved(t *testing.T) {
	h := newHarness(t)
	c, member := h.goneJobInCgroup(t)
	member.Process.Kill()
	member.Wait()
	got, err := h.st.Get(c.ID)
	if err != nil {
		t.Fatal(err)
	}
	dir := claimCgroup(&got)
	if err := h.d.write(&got, store.Retired, verdict.Verdict{Result: verdict.Foreign}, nil); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, func() bool {
		_, err := os.Stat(dir)
		return errors.Is(err, os.ErrNotExist)
	}, "the retired claim's empty cgroup %s was left", dir)
}

// goneJobInCgroup stores a running job whose root has gone, with a cgroup
// of its own that holds a member (returned), skipping where no cgroup v2
// is writable.
func (h *harness) goneJobInCgroup(t *testing.T) (store.Claim, *exec.Cmd) {
	t.Helper()
	base := findCgroupBase("auto")
	if base.dir == "" {
		testenv.Skip(t, "no writable cgroup v2: %s", base.reason)
	}
	pid, tok := h.goneInstance(t)
	c := store.Claim{Kind: store.Job, State: store.Running, Pid: pid, Token: tok}
	if err := h.st.Put(&c); err != nil {
		t.Fatal(err)
	}
	h.d.claims.set(&c)
	return c, h.cgroupMember(t, base, c.ID)
}
