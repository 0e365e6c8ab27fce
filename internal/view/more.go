package view

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/buildinfo"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// Verdict prints a verdict on one line: the word, then why and who judged
// ("FOREIGN: start time differs: the pid was reissued (by local:pidfd)").
func Verdict(w io.Writer, v verdict.Verdict) {
	fmt.Fprintf(w, "%s: %s (by %s)\n", v.Result, Sanitize(v.Reason), Sanitize(v.Mechanism))
}

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

// clearScreen moves the cursor home and clears the terminal.
const clearScreen = "\x1b[H\x1b[2J"

// Watch calls render every interval until ctx ends, and writes a frame
// each time what it rendered differs from the last frame: after clearing
// the screen when w is a terminal, else after a blank line. The first frame
// is written at once. An error of render ends the watch; ctx ending is a
// clean stop (nil).
func Watch(ctx context.Context, w io.Writer, every time.Duration, render func(io.Writer) error) error {
	tty := Width(w) > 0
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
			switch {
			case tty:
				io.WriteString(w, clearScreen)
			case !first:
				io.WriteString(w, "\n")
			}
			if _, err := w.Write(cur.Bytes()); err != nil {
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

// Version prints what the binary is: version, commit, date, Go version
// and the embedded eBPF object's hash.
func Version(w io.Writer, i buildinfo.Info) {
	commit, date, bpf := i.Commit, i.Date, i.BPFObject
	if commit == "" {
		commit = "unknown (built without VCS information)"
	} else if i.Modified {
		commit += " (with uncommitted changes)"
	}
	if date == "" {
		date = "unknown"
	}
	if bpf == "" {
		bpf = "none (no eBPF on this platform)"
	} else {
		bpf = "sha256:" + bpf
	}
	table(w, [][]string{{"supervisor", i.Version}, {"commit", commit}, {"commit date", date}, {"go", i.GoVersion}, {"bpf object", bpf}})
}

// JSON writes v as JSON, on one line when indent is "", with <, > and &
// as they are (no HTML escapes: this is a terminal or a pipe, not a page).
func JSON(w io.Writer, v any, indent string) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", indent)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode JSON: %w", err)
	}
	return nil
}

// Print writes v as indented JSON when asJSON is set, otherwise as text
// renders it.
func Print(w io.Writer, asJSON bool, v any, text func(io.Writer)) error {
	if asJSON {
		return JSON(w, v, "  ")
	}
	text(w)
	return nil
}
