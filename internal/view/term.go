package view

import (
	"bytes"
	"context"
	"io"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Width returns the width in columns of the terminal w writes to
// (TIOCGWINSZ on its descriptor), or 0 when w is not a terminal.
func Width(w io.Writer) int {
	f, ok := w.(interface{ Fd() uintptr })
	if !ok {
		return 0
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0
	}
	return int(ws.Col)
}

// Terminal reports whether w writes to a terminal (TIOCGWINSZ answers on
// its descriptor; a terminal of 0 columns is one too).
func Terminal(w io.Writer) bool {
	f, ok := w.(interface{ Fd() uintptr })
	if !ok {
		return false
	}
	_, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	return err == nil
}

// clearScreen moves the cursor home and clears the terminal.
const clearScreen = "\x1b[H\x1b[2J"

// Watch calls render every interval until ctx ends, and writes a frame
// each time what it rendered differs from the last frame: after clearing
// the screen, each line cut to the width, when w is a terminal; else after
// a blank line. The first frame
// is written at once. An error of render ends the watch; ctx ending is a
// clean stop (nil).
func Watch(ctx context.Context, w io.Writer, every time.Duration, render func(io.Writer) error) error {
	width := Width(w)
	last, cur := new(bytes.Buffer), new(bytes.Buffer)
	t := time.NewTicker(every)
	defer t.Stop()
	for first := true; ; first = false {
		cur.Reset()
		if err := render(cur); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if !bytes.Equal(cur.Bytes(), last.Bytes()) {
			frame := cur.Bytes()
			switch {
			case width > 0: // one write: the screen never shows half a frame
				frame = append([]byte(clearScreen), cutLines(frame, width)...)
			case !first:
				io.WriteString(w, "\n")
			}
			if _, err := w.Write(frame); err != nil {
				return err
			}
			last, cur = cur, last
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// cutLines cuts each line of b to width columns (Cut).
func cutLines(b []byte, width int) []byte {
	lines := strings.SplitAfter(string(b), "\n")
	for i, l := range lines {
		body, nl := strings.CutSuffix(l, "\n")
		lines[i] = Cut(body, width)
		if nl {
			lines[i] += "\n"
		}
	}
	return []byte(strings.Join(lines, ""))
}
