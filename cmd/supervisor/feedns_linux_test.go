package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationFeedMountNamespaceDeleted: under eBPF and netlink, the
// exec lines of the log feed say in which mount namespace their paths
// are, and which of them were unlinked. A shell nobody runs in a mount
// namespace of its own (unshare -Urm, open to any user: the one that may
// bind its own program on /usr/bin/passwd) has that namespace's inode in
// supervisor.mnt_ns, not the daemon's; a plain shell has the daemon's. A
// copy of the shell run by descriptor after its name was unlinked and
// taken by another file is logged under the old name with
// supervisor.executable_deleted; a shell exec'd from a directory removed
// before has supervisor.working_directory_deleted; a plain exec neither.
func TestIntegrationFeedMountNamespaceDeleted(t *testing.T) {
	testenv.RequireRoot(t)
	for _, tool := range []string{"setpriv", "unshare"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Skip(t, "%s: %v", tool, err)
		}
	}
	sh, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, mech := range []string{"ebpf", "netlink"} {
		t.Run(mech, func(t *testing.T) {
			state, sock := newDirs(t)
			d := startDaemon(t, state, sock, "--mechanism", mech, "--log-process-events")
			logPath := filepath.Join(filepath.Dir(sock), "log.json")
			host := nsInode(t, d.cmd.Process.Pid)
			dir, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}

			// The program, opened, unlinked, its name taken by another.
			prog := filepath.Join(dir, "prog")
			b, err := os.ReadFile(sh)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(prog, b, 0o755); err != nil {
				t.Fatal(err)
			}
			progFile, err := os.Open(prog)
			if err != nil {
				t.Fatal(err)
			}
			defer progFile.Close()
			if err := os.Remove(prog); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(prog, []byte("#!/bin/sh\necho another program\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			gone := filepath.Join(dir, "gone")
			if err := os.Mkdir(gone, 0o755); err != nil {
				t.Fatal(err)
			}

			marker := fmt.Sprintf("feedns-%s-%d-%d", mech, os.Getpid(), time.Now().UnixNano())
			type run struct {
				name string
				cmd  *exec.Cmd
				in   io.WriteCloser
			}
			// Each shell waits on its stdin, so that netlink's read of
			// /proc finds it; its marker is its last argument.
			runs := []*run{
				{name: "private", cmd: exec.Command("setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
					"unshare", "-Urm", sh, "-c", "read x", marker+"-private")},
				{name: "plain", cmd: exec.Command(sh, "-c", "read x", marker+"-plain")},
				{name: "deleted", cmd: exec.Command("/proc/self/fd/3", "-c", "read x", marker+"-deleted")},
				{name: "gone cwd", cmd: exec.Command(sh, "-c", `cd "$0" && rmdir "$0" && exec "$1" -c "read x" "$2"`, gone, sh, marker+"-gone")},
			}
			runs[2].cmd.ExtraFiles = []*os.File{progFile}
			for _, r := range runs {
				if r.cmd.Dir == "" {
					r.cmd.Dir = "/"
				}
				if r.in, err = r.cmd.StdinPipe(); err != nil {
					t.Fatal(err)
				}
				if err := r.cmd.Start(); err != nil {
					t.Fatal(err)
				}
				defer r.cmd.Wait()
				defer r.in.Close()
			}
			// The shell's own namespace, read while it waits, once unshare
			// has run it.
			private := strconv.Itoa(runs[0].cmd.Process.Pid)
			testenv.Eventually(t, 10*time.Second, func() bool {
				exe, _ := os.Readlink("/proc/" + private + "/exe")
				return exe == sh
			}, "the shell never ran in the namespace")
			privateNS := nsInode(t, runs[0].cmd.Process.Pid)
			if privateNS == host {
				t.Fatalf("unshare -Urm left the shell in the daemon's mount namespace %d", host)
			}

			suffixes := []string{"-private", "-plain", "-deleted", "-gone"}
			lines := map[string]map[string]any{}
			testenv.Eventually(t, 20*time.Second, func() bool {
				for l := range strings.SplitSeq(readFile(logPath), "\n") {
					if !strings.Contains(l, `"process_exec"`) || !strings.Contains(l, marker) {
						continue
					}
					var m map[string]any
					if json.Unmarshal([]byte(l), &m) != nil {
						continue
					}
					p, _ := m["process"].(map[string]any)
					args, _ := p["args"].([]any)
					// The shell's own exec alone: setpriv and unshare
					// carry the private shell's marker in their
					// arguments too, and their lines (in the daemon's
					// mount namespace) can be written first.
					if len(args) != 4 || args[1] != "-c" {
						continue
					}
					for _, s := range suffixes {
						if args[3] == marker+s {
							lines[s] = m
						}
					}
				}
				return len(lines) == len(suffixes)
			}, "never: the exec lines of the four shells in %s\n%s", logPath, readFile(logPath))

			sup := func(s string) map[string]any { m, _ := lines[s]["supervisor"].(map[string]any); return m }
			proc := func(s string) map[string]any { m, _ := lines[s]["process"].(map[string]any); return m }
			ns := func(s string) uint64 { v, _ := sup(s)["mnt_ns"].(float64); return uint64(v) }
			if got := ns("-private"); got != privateNS {
				t.Errorf("nobody's shell in unshare -Urm: supervisor.mnt_ns = %d, want its own %d (the daemon's is %d)", got, privateNS, host)
			}
			for _, s := range []string{"-plain", "-deleted", "-gone"} {
				if got := ns(s); got != host {
					t.Errorf("%s: supervisor.mnt_ns = %d, want the daemon's %d", s, got, host)
				}
			}
			if p, s := proc("-deleted"), sup("-deleted"); p["executable"] != prog || s["executable_deleted"] != true || s["working_directory_deleted"] != nil {
				t.Errorf("the unlinked program: executable %v, supervisor %v; want %s marked executable_deleted alone", p["executable"], s, prog)
			}
			if p, s := proc("-gone"), sup("-gone"); p["working_directory"] != gone || s["working_directory_deleted"] != true || s["executable_deleted"] != nil {
				t.Errorf("the removed directory: working_directory %v, supervisor %v; want %s marked working_directory_deleted alone", p["working_directory"], s, gone)
			}
			for _, s := range []string{"-plain", "-private"} {
				if m := sup(s); m["executable_deleted"] != nil || m["working_directory_deleted"] != nil {
					t.Errorf("%s: supervisor %v, want no deletion marks", s, m)
				}
			}
			if p := proc("-plain"); p["executable"] != sh || p["working_directory"] != "/" {
				t.Errorf("the plain shell: executable %v working_directory %v, want %s and /", p["executable"], p["working_directory"], sh)
			}
		})
	}
}

// nsInode returns the inode of the mount namespace of process pid.
func nsInode(t *testing.T, pid int) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat("/proc/"+strconv.Itoa(pid)+"/ns/mnt", &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}
