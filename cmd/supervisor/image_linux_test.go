package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/testenv"
)

// imageLine is what TestIntegrationForkedImage reads of an `events --json`
// line.
type imageLine struct {
	Kind   string
	Pid    int
	PPid   int
	Exe    string
	Argv   []string
	Cwd    string `json:"working_directory"`
	Parent struct {
		Comm string
		Exe  string
		Argv []string
	}
}

// TestIntegrationForkedImage runs a shell whose subshell forks without an
// exec of its own and then runs a program: the subshell's fork line says
// what it runs (the shell's executable and arguments), its exit line the
// executable it ran last (the shell's, or the program it exec'd itself),
// the program's lines name the subshell as a parent running the shell,
// and the program's exit line says which executable it ran, without its
// arguments. No fork or exit line has a working directory (a chdir is no
// event).
func TestIntegrationForkedImage(t *testing.T) {
	testenv.RequireRoot(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, errb := &lockedBuffer{}, &lockedBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- runMain(ctx, &cliEnv{stdout: out, stderr: errb}, []string{"events", "--json", "--mechanism", "ebpf"})
	}()
	testenv.Eventually(t, 30*time.Second, func() bool { return strings.Contains(errb.String(), "mechanism ebpf") },
		"events never started: %s", errb)

	marker := fmt.Sprintf("image-%d-%d", os.Getpid(), time.Now().UnixNano())
	script := "(/bin/true " + marker + " one; /bin/true " + marker + " two); exit 0"
	sh := exec.Command("/bin/sh", "-c", script)
	if err := sh.Run(); err != nil {
		t.Fatal(err)
	}
	shExe, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	trueExe, err := filepath.EvalSymlinks("/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	shArgv := []string{"/bin/sh", "-c", script}
	one := []string{"/bin/true", marker, "one"}

	// The exit of the first true: its exec, its parent's fork, its
	// parent's exit all come before it or soon after.
	var lines []imageLine
	var first imageLine // the exec of the first true
	testenv.Eventually(t, 30*time.Second, func() bool {
		lines = lines[:0]
		sc := bufio.NewScanner(strings.NewReader(out.String()))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var l imageLine
			if json.Unmarshal(sc.Bytes(), &l) == nil {
				lines = append(lines, l)
			}
		}
		for _, l := range lines {
			if l.Kind == "exec" && slices.Equal(l.Argv, one) {
				first = l
			}
		}
		if first.Pid == 0 {
			return false
		}
		var exited, parentExited bool
		for _, l := range lines {
			exited = exited || l.Kind == "exit" && l.Pid == first.Pid
			parentExited = parentExited || l.Kind == "exit" && l.Pid == first.PPid
		}
		return exited && parentExited
	}, "no exec and exits of %s and its parent in:\n%s", marker, out)
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("events exited %d: %s", code, errb)
	}

	sub := first.PPid
	// The subshell runs the shell until it execs (a shell may exec the
	// last command of a subshell itself): then its exit is that program's.
	subExit := imageLine{Exe: shExe, Argv: shArgv}
	for _, l := range lines {
		if l.Pid == sub && l.Kind == "exec" {
			subExit = l
		}
	}
	checked := 0
	for _, l := range lines {
		switch {
		case l.Pid == sub && (l.Kind == "fork" || l.Kind == "exit"):
			checked++
			want := imageLine{Exe: shExe, Argv: shArgv}
			if l.Kind == "exit" {
				want = imageLine{Exe: subExit.Exe} // an exit's executable, not its arguments
			}
			if l.Exe != want.Exe || !slices.Equal(l.Argv, want.Argv) {
				t.Errorf("subshell %s line: exe %q argv %q, want %q %q", l.Kind, l.Exe, l.Argv, want.Exe, want.Argv)
			}
			if l.Cwd != "" {
				t.Errorf("subshell %s line: working directory %q, want none", l.Kind, l.Cwd)
			}
		case l.Pid == first.Pid && l.PPid == sub:
			// The first true: its parent is the subshell, running the shell.
			checked++
			if l.Parent.Exe != shExe || !slices.Equal(l.Parent.Argv, shArgv) {
				t.Errorf("true's %s line: parent exe %q argv %q, want %q %q", l.Kind, l.Parent.Exe, l.Parent.Argv, shExe, shArgv)
			}
			switch l.Kind {
			case "fork":
				if l.Exe != shExe || !slices.Equal(l.Argv, shArgv) {
					t.Errorf("true's fork line: exe %q argv %q, want the subshell's image %q %q", l.Exe, l.Argv, shExe, shArgv)
				}
			case "exec":
				if l.Exe != trueExe || !slices.Equal(l.Argv, one) {
					t.Errorf("true's exec line: exe %q argv %q, want %q %q", l.Exe, l.Argv, trueExe, one)
				}
			case "exit":
				if l.Exe != trueExe || l.Argv != nil {
					t.Errorf("true's exit line: exe %q argv %q, want %q and no arguments", l.Exe, l.Argv, trueExe)
				}
			}
			if l.Kind != "exec" && l.Cwd != "" {
				t.Errorf("true's %s line: working directory %q, want none", l.Kind, l.Cwd)
			}
		}
	}
	// The subshell's fork and exit, the true's fork, exec and exit.
	if checked != 5 {
		t.Errorf("checked %d lines of the subshell %d and true %d, want 5:\n%s", checked, sub, first.Pid, out)
	}
}
