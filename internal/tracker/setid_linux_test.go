package tracker

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/procfs"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// setIDSleep copies /bin/sleep into a directory of its own where set-id
// bits work (not on a nosuid mount), owned by uid:gid with both bits set.
func setIDSleep(t *testing.T, uid, gid int) string {
	t.Helper()
	var dir string
	for _, parent := range []string{os.TempDir(), "."} {
		d, err := os.MkdirTemp(parent, "setid")
		if err != nil {
			continue
		}
		var st unix.Statfs_t
		if err := unix.Statfs(d, &st); err == nil && st.Flags&unix.ST_NOSUID == 0 {
			dir = d
			break
		}
		os.RemoveAll(d)
	}
	if dir == "" {
		t.Fatal("no directory outside a nosuid mount for a set-id binary")
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/bin/sleep")
	if err != nil {
		t.Fatal(err)
	}
	path, err := filepath.Abs(filepath.Join(dir, "setid-sleep"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, uid, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o755|os.ModeSetuid|os.ModeSetgid); err != nil { // chown cleared them
		t.Fatal(err)
	}
	return path
}

// TestIntegrationSetIDExec: a set-user-id and set-group-id program run by
// nobody has its real ids from nobody and its effective and saved ids from
// the file (the saved ones are copied from the effective at exec). Every
// source that gives the ids keeps the three apart: eBPF always, netlink
// when its /proc read found the process (it lives 5 s).
func TestIntegrationSetIDExec(t *testing.T) {
	const fileUID, fileGID, nobody = 4343, 4242, 65534
	for _, mech := range []string{"ebpf", "netlink"} {
		t.Run(mech, func(t *testing.T) {
			testenv.RequireRoot(t)
			boot, err := procfs.ReadBootID("/proc")
			if err != nil {
				t.Fatal(err)
			}
			prog := setIDSleep(t, fileUID, fileGID)
			var mu sync.Mutex
			var got []events.Event
			tr, err := Start(context.Background(), Options{Mechanism: mech, Boot: boot, ExecContext: func() bool { return true },
				OnEvent: func(ev *events.Event) {
					if ev.Kind == events.Exec && ev.Exe == prog {
						mu.Lock()
						got = append(got, ev.Clone()) // its strings live until the next event
						mu.Unlock()
					}
				}})
			if err != nil {
				testenv.Skip(t, "mechanism %s: %v", mech, err)
			}
			defer tr.Close()
			cmd := exec.Command(prog, "5")
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { cmd.Process.Kill(); cmd.Wait() }()
			pid := int32(cmd.Process.Pid)
			var ev events.Event
			testenv.Eventually(t, 10*time.Second, func() bool {
				mu.Lock()
				defer mu.Unlock()
				for _, e := range got {
					if e.Pid == pid {
						ev = e
						return true
					}
				}
				return false
			}, "no exec of %s (pid %d) with its executable", prog, pid)
			c := ev.Ctx
			if !c.Valid {
				t.Fatalf("the exec of %s carries no ids", prog)
			}
			if c.UID != nobody || c.EUID != fileUID || c.SUID != fileUID {
				t.Errorf("uids real %d effective %d saved %d, want %d %d %d", c.UID, c.EUID, c.SUID, nobody, fileUID, fileUID)
			}
			if c.GID != nobody || c.EGID != fileGID || c.SGID != fileGID {
				t.Errorf("gids real %d effective %d saved %d, want %d %d %d", c.GID, c.EGID, c.SGID, nobody, fileGID, fileGID)
			}
		})
	}
}
