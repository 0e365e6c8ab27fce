package view

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestWidth reads a terminal's width from the kernel, and says 0 for what
// is not a terminal (a file, a pipe, a buffer).
func TestWidth(t *testing.T) {
	_, tty, _ := testenv.Pty(t)
	for _, cols := range []uint16{37, 211} {
		if err := unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: cols}); err != nil {
			t.Fatal(err)
		}
		if got := Width(tty); got != int(cols) {
			t.Errorf("Width(a %d-column terminal) = %d", cols, got)
		}
	}
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for name, out := range map[string]io.Writer{"a file": f, "a pipe": w, "a buffer": &testenv.Buffer{}} {
		if got := Width(out); got != 0 {
			t.Errorf("Width(%s) = %d, want 0", name, got)
		}
	}
}

// TestWatchTerminal: on a terminal, each frame clears the screen and its
// lines are cut to the terminal's width.
func TestWatchTerminal(t *testing.T) {
	master, tty, _ := testenv.Pty(t)
	if err := unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 10}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	err := Watch(ctx, tty, time.Millisecond, func(w io.Writer) error {
		cancel()
		_, err := io.WriteString(w, "short\nsomething much longer\n")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// The terminal's line discipline turns \n into \r\n. The frame may
	// come out of the master in more than one read.
	want := clearScreen + "short\r\nsomethin…\r\n"
	read := make(chan string, 1)
	go func() {
		var got []byte
		buf := make([]byte, 256)
		for len(got) < len(want) {
			n, err := master.Read(buf)
			got = append(got, buf[:n]...)
			if err != nil {
				break
			}
		}
		read <- string(got)
	}()
	select {
	case got := <-read:
		if got != want {
			t.Errorf("Watch on a 10-column terminal wrote %q, want %q", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("Watch on a 10-column terminal: less than the %d bytes of %q in 10 s", len(want), want)
	}
}

// readLines reads from the master side of a terminal until n lines came
// (the line discipline writes each \n as \r\n), for at most 10 s.
func readLines(t *testing.T, master *os.File, n int) []string {
	t.Helper()
	read := make(chan string, 1)
	go func() {
		var got []byte
		buf := make([]byte, 4096)
		for strings.Count(string(got), "\r\n") < n {
			k, err := master.Read(buf)
			got = append(got, buf[:k]...)
			if err != nil {
				break
			}
		}
		read <- string(got)
	}()
	select {
	case got := <-read:
		lines := strings.SplitAfter(got, "\r\n")
		return lines[:len(lines)-1] // after the last \r\n: ""
	case <-time.After(10 * time.Second):
		t.Fatalf("fewer than %d lines from the terminal in 10 s", n)
		return nil
	}
}

// columns counts the columns of s as a terminal could at most show them:
// one for ASCII, two for any other character.
func columns(s string) int {
	n := 0
	for _, r := range s {
		n++
		if r >= utf8.RuneSelf {
			n++
		}
	}
	return n
}

// TestEventsTerminalNoWrap: an argument of "make" padded with NBSPs to the
// edge of root's 100-column terminal, then a line of root running passwd
// written with NBSPs, showed a second line that was not an event. On a
// terminal each line is one line within the width, with no NBSP left; the
// width is read again when the terminal narrows.
func TestEventsTerminalNoWrap(t *testing.T) {
	master, tty, _ := testenv.Pty(t)
	setWidth := func(cols uint16) {
		if err := unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: cols}); err != nil {
			t.Fatal(err)
		}
	}
	setWidth(100)
	const nbsp = "\u00a0"
	prefix := "20:45:01.000  exec   4242     4241     1000    " // the columns before argv
	fake := strings.ReplaceAll("20:45:01.001  exec   4243     1        0       passwd root", " ", nbsp)
	arg := "make" + strings.Repeat(nbsp, 100-len(prefix)-len("make")) + fake
	p, err := NewEventPrinter(tty, EventOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.Start()
	line, _ := json.Marshal(api.StreamRecord{Kind: "exec", Pid: 4242, PPid: 4241, UID: uidp(1000), Comm: "make", Argv: []string{arg},
		Time: "2026-01-02T03:04:05Z"})
	if err := p.Line(line); err != nil {
		t.Fatal(err)
	}
	check := func(lines []string, width int) {
		t.Helper()
		for _, l := range lines {
			l = strings.TrimSuffix(l, "\r\n")
			if c := columns(l); c > width || strings.ContainsAny(l, "\r\n") {
				t.Errorf("a line of %d columns on a %d-column terminal: %q", c, width, l)
			}
			if strings.Contains(l, nbsp) {
				t.Errorf("an NBSP reached the terminal: %q", l)
			}
		}
	}
	lines := readLines(t, master, 2) // the header and the exec
	if len(lines) != 2 || !strings.Contains(lines[1], " exec ") || !strings.Contains(lines[1], " make??") {
		t.Errorf("want the header and one exec line of make, got %q", lines)
	}
	check(lines, 100)

	setWidth(60)
	time.Sleep(3 * events.FlushEvery) // the first line's flush is done
	if err := p.Line(line); err != nil {
		t.Fatal(err)
	}
	lines = readLines(t, master, 1)
	if len(lines) != 1 || !strings.HasSuffix(lines[0], "…\r\n") {
		t.Errorf("want one line cut, got %q", lines)
	}
	check(lines, 60)
}

// TestShowTerminalNoWrap: a user's owner label padded with spaces to the
// edge of root's terminal, then "uid: 0 (gid 0)", wrapped in show into a
// line that read as the claim's uid. On a terminal each line of a table
// (show, list) is cut to the width.
func TestShowTerminalNoWrap(t *testing.T) {
	master, tty, _ := testenv.Pty(t)
	if err := unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 100}); err != nil {
		t.Fatal(err)
	}
	owner := "ops" + strings.Repeat(" ", 87) + "uid:      0 (gid 0)"
	cl := api.Claim{ID: "j-aaaaaaaaaaaa", Kind: "job", State: "running", Owner: owner, UID: 1004, GID: 1006,
		Argv: []string{"sleep", "600"}, Pid: 42}
	Show(tty, cl, time.Now())
	lines := readLines(t, master, 5)
	for _, l := range lines {
		l = strings.TrimSuffix(l, "\r\n")
		if c := columns(l); c > 100 {
			t.Errorf("a line of %d columns on a 100-column terminal: %q", c, l)
		}
		if strings.HasPrefix(l, "uid:") && !strings.Contains(l, "1004") {
			t.Errorf("a line that reads as the claim's uid: %q", l)
		}
	}
}
