package daemon

import (
	"bufio"
	"context"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/pidfd"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestMemberKillsCappedPerUID: a kill of a member runs in a worker of the
// daemon's that outlives the request and holds the member's pidfd for its
// grace (up to an hour). Before the cap, uid 65534 could start one for
// each process it forks under one claim, leaving each request at once,
// and so hold as many descriptors and goroutines of the root daemon as it
// had processes: its claim quota bounds only the teardowns of roots.
func TestMemberKillsCappedPerUID(t *testing.T) {
	h := newHarness(t)
	h.d.work.capUID = 2
	t.Cleanup(h.d.work.stop)
	const nobody, members = 65534, 4
	script := `for i in 1 2 3 4; do sh -c 'trap "" TERM; echo $$; while :; do sleep 1; done' & done; wait`
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	r := bufio.NewReader(out)
	var pids []int32
	for range members {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		p, err := strconv.Atoi(strings.TrimSpace(line))
		if err != nil {
			t.Fatalf("script printed %q, want a pid", line)
		}
		pids = append(pids, int32(p))
	}
	testenv.Eventually(t, 10*time.Second, func() bool {
		for _, m := range pids {
			if _, ok := h.d.tr.Load().Graph().Live(m); !ok {
				return false
			}
		}
		return true
	}, "the graph never saw the members born")

	h.grant(t, cmd.Process.Pid, nobody)

	p := api.Peer{UID: nobody, GID: nobody, Pid: 1}
	left, cancel := context.WithCancel(context.Background())
	cancel() // the caller leaves at once; the worker goes on
	hour := api.Duration(time.Hour)
	refused := 0
	for _, m := range pids {
		mh, err := pidfd.Open(m, h.boot)
		if err != nil {
			t.Fatal(err)
		}
		_, err = h.d.Kill(left, p, &api.ClaimRequest{Pid: m, Token: mh.Token(), Grace: &hour})
		mh.Close()
		switch {
		case errors.Is(err, api.ErrQuota):
			refused++
		case err != nil && !errors.Is(err, context.Canceled):
			t.Fatalf("kill of member %d: %v", m, err)
		}
	}
	if n := h.d.work.count(); n > h.d.work.capUID || refused != members-h.d.work.capUID {
		t.Fatalf("%d member kills of uid %d running, %d refused: want at most %d running, the rest refused with ErrQuota",
			n, nobody, refused, h.d.work.capUID)
	}
	// Root is not capped.
	root := api.Peer{UID: 0, Pid: 1}
	mh, err := pidfd.Open(pids[members-1], h.boot)
	if err != nil {
		t.Fatal(err)
	}
	defer mh.Close()
	if _, err := h.d.Kill(left, root, &api.ClaimRequest{Pid: pids[members-1], Token: mh.Token(), Grace: &hour}); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("root's kill of a member over uid %d's cap: %v", nobody, err)
	}
}
