package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationOutputEscapesOnTerminal: a user's job writes an OSC 52
// clipboard write, a colour and a C1 CSI; root's `output` shows them as
// \xNN on a terminal, writes them as they are with --raw, and to a pipe.
func TestIntegrationOutputEscapesOnTerminal(t *testing.T) {
	testenv.RequireRoot(t)
	t.Parallel()
	state, sock := newDirs(t)
	d := startDaemon(t, state, sock, "--socket-group", "65534")
	owner := &syscall.Credential{Uid: nobody, Gid: nobody}
	code, out, errs := d.run(t, owner, "launch", "--json", "--detach", "--cwd", "/", "--",
		"printf", `\033]52;c;aGk=\007\033[31mred\tx\r\302\2332J\n`)
	if code != 0 {
		t.Fatalf("launch as nobody: exit %d: %s", code, errs)
	}
	var job api.Claim
	if err := json.Unmarshal([]byte(out), &job); err != nil {
		t.Fatal(err)
	}
	raw := "\x1b]52;c;aGk=\x07\x1b[31mred\tx\r\u009b2J\n"
	testenv.Eventually(t, 20*time.Second, func() bool {
		code, out, _ = d.run(t, nil, "output", job.ID)
		return code == 0 && out == raw
	}, "root's output to a pipe: exit %d %q, want %q as it is", code, out, raw)

	master, tty, _ := testenv.Pty(t)
	// The line discipline writes each \n as \r\n.
	escaped := `\x1b]52;c;aGk=\x07\x1b[31mred` + "\t" + `x\x0d\xc2\x9b2J` + "\r\n"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"output", "--socket", d.sock, job.ID}, escaped},
		{[]string{"output", "--raw", "--socket", d.sock, job.ID}, strings.ReplaceAll(raw, "\n", "\r\n")},
	} {
		var errb bytes.Buffer
		if code := runMain(context.Background(), &cliEnv{stdout: tty, stderr: &errb}, tc.args); code != 0 {
			t.Fatalf("%s: exit %d: %s", tc.args, code, errb.String())
		}
		got := readTerminal(t, master, len(tc.want))
		if got != tc.want {
			t.Errorf("%s on a terminal wrote %q, want %q", tc.args, got, tc.want)
		}
	}
}

// readTerminal reads n bytes from the master side of a terminal, within
// 10 s.
func readTerminal(t *testing.T, master *os.File, n int) string {
	t.Helper()
	read := make(chan []byte, 1)
	go func() {
		var got []byte
		buf := make([]byte, 4096)
		for len(got) < n {
			k, err := master.Read(buf)
			got = append(got, buf[:k]...)
			if err != nil {
				break
			}
		}
		read <- got
	}()
	select {
	case got := <-read:
		return string(got)
	case <-time.After(10 * time.Second):
		t.Fatalf("fewer than %d bytes from the terminal in 10 s", n)
		return ""
	}
}
