package view

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/procsupervisor/supervisor/internal/buildinfo"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// Verdict prints a verdict on one line: the word, then why and who judged
// ("FOREIGN: start time differs: the pid was reissued (by local:pidfd)").
func Verdict(w io.Writer, v verdict.Verdict) {
	fmt.Fprintf(w, "%s: %s (by %s)\n", v.Result, Sanitize(v.Reason), Sanitize(v.Mechanism))
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
