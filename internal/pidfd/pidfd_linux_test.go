package pidfd

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

func TestCheckPid(t *testing.T) {
	for _, tt := range []struct {
		pid int64
		ok  bool
	}{{1, true}, {MaxPid, true}, {0, false}, {-1, false}, {MaxPid + 1, false}, {1 << 40, false}} {
		if err := CheckPid(tt.pid); (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrInvalidPid)) {
			t.Errorf("CheckPid(%d) = %v, want ok %v", tt.pid, err, tt.ok)
		}
	}
}

func TestOpenBindsOneInstance(t *testing.T) {
	boot, err := procfs.ReadBootID("/proc")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := int32(cmd.Process.Pid)
	h, err := Open(pid, boot)
	if err != nil {
		t.Fatalf("Open(%d) = %v", pid, err)
	}
	defer h.Close()
	var st procfs.Stat
	if err := procfs.NewReader("/proc").ReadStat(pid, &st); err != nil {
		t.Fatal(err)
	}
	tok := h.Token()
	if h.Pid() != pid || tok.Start != st.StartTime || tok.Boot != boot || h.Zombie() || h.Exited() {
		t.Fatalf("handle = pid %d token %v zombie %v, want pid %d start %d, live", h.Pid(), tok, h.Zombie(), pid, st.StartTime)
	}
	if err := h.Signal(0); err != nil {
		t.Errorf("Signal(0) to a live process = %v", err)
	}
	if err := h.Signal(unix.SIGKILL); err != nil {
		t.Fatalf("Signal(SIGKILL) = %v", err)
	}
	if !h.Wait(10 * time.Second) {
		t.Fatal("Wait: the killed process never exited")
	}
	cmd.Wait() // reap: the pid may now be reissued, the handle must not follow it
	if err := h.Signal(0); !errors.Is(err, ErrGone) {
		t.Errorf("Signal after reaping = %v, want ErrGone", err)
	}
	// The pid may have been reissued already: a new handle must then name
	// another instance.
	if h2, err := Open(pid, boot); err == nil {
		if h2.Token() == tok {
			t.Errorf("a new handle on reissued pid %d has the old token", pid)
		}
		h2.Close()
	} else if !errors.Is(err, ErrGone) {
		t.Errorf("Open(reaped pid) = %v, want ErrGone", err)
	}
}

func TestOpenRefusesThreads(t *testing.T) {
	boot, _ := procfs.ReadBootID("/proc")
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range tasks {
		tid, _ := strconv.Atoi(e.Name())
		if tid == 0 || tid == os.Getpid() {
			continue
		}
		_, err := Open(int32(tid), boot)
		var te *ThreadError
		if !errors.As(err, &te) || te.Tgid != int32(os.Getpid()) || !errors.Is(err, ErrNotProcess) {
			t.Errorf("Open(thread %d) = %v, want a ThreadError naming process %d", tid, err, os.Getpid())
		}
		return
	}
	t.Fatal("no thread besides the leader")
}

func TestReadToken(t *testing.T) {
	boot, err := procfs.ReadBootID("/proc")
	if err != nil {
		t.Fatal(err)
	}
	self := int32(os.Getpid())
	h, err := Open(self, boot)
	if err != nil {
		t.Fatal(err)
	}
	want := h.Token()
	h.Close()
	if got, err := ReadToken(self, boot); err != nil || got != want {
		t.Errorf("ReadToken(self) = %v, %v, want %v", got, err, want)
	}
	if _, err := ReadToken(0, boot); !errors.Is(err, ErrInvalidPid) {
		t.Errorf("ReadToken(0) = %v, want ErrInvalidPid", err)
	}
	// A child that exited and is not reaped yet is a zombie: gone.
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	pid := int32(cmd.Process.Pid)
	testenv.Eventually(t, 10*time.Second, func() bool {
		var st procfs.Stat
		return procfs.NewReader("/proc").ReadStat(pid, &st) == nil && st.Zombie()
	}, "child %d never became a zombie", pid)
	if _, err := ReadToken(pid, boot); !errors.Is(err, ErrGone) {
		t.Errorf("ReadToken(zombie %d) = %v, want ErrGone", pid, err)
	}
}

// TestOpenShortOfDescriptors: a pidfd that cannot be had for want of a
// descriptor is ErrResource, never ErrGone nor a thread: the process may
// well be alive.
func TestOpenShortOfDescriptors(t *testing.T) {
	var h *Handle
	var err error
	testenv.WithoutFDs(t, func() { h, err = Open(int32(os.Getpid()), procfs.BootID{}) })
	if err == nil {
		h.Close()
		t.Fatal("Open with no descriptor left succeeded")
	}
	if !errors.Is(err, ErrResource) || errors.Is(err, ErrGone) {
		t.Errorf("Open with no descriptor left = %v, want ErrResource", err)
	}
}
