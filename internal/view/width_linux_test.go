package view

import (
	"context"
	"io"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

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
	want := clearScreen + "short\r\nsomething…\r\n"
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
