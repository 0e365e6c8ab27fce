package view

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/procsupervisor/supervisor/internal/buildinfo"
	"github.com/procsupervisor/supervisor/internal/jsonx"
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
// The characters a terminal or a reader of lines would act on are written
// as \uXXXX escapes: encoding/json escapes those under U+0020, U+2028 and
// U+2029, termEscape DEL, the C1 controls and the bidirectional controls,
// which encoding/json writes raw.
func JSON(w io.Writer, v any, indent string) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", indent)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("encode JSON: %w", err)
	}
	_, err := w.Write(termEscape(b.Bytes()))
	return err
}

// termEscape returns the JSON text p with each DEL, C1 control (U+0080 to
// U+009F: U+009B is CSI, U+009D OSC to terminals that take 8-bit
// controls), U+2028, U+2029 and bidirectional control (U+202E shows what
// follows it reversed) written as its \uXXXX escape. When p holds none it
// returns p itself, without copying. p must be what encoding/json wrote:
// valid UTF-8 (it writes \ufffd for a byte that is not), where DEL or a
// byte of 0x80 or more stands only inside a string, where the escape means
// the character itself, and never after a backslash.
func termEscape(p []byte) []byte {
	var out []byte
	start := 0
	for i := 0; i < len(p); {
		r, size := rune(p[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRune(p[i:])
		}
		if r == 0x7f || r >= utf8.RuneSelf && jsonx.Escaped(r) {
			if out == nil {
				out = make([]byte, 0, len(p)+32)
			}
			out = append(out, p[start:i]...)
			out = append(out, '\\', 'u', hexDigits[r>>12], hexDigits[r>>8&15], hexDigits[r>>4&15], hexDigits[r&15])
			start = i + size
		}
		i += size
	}
	if out == nil {
		return p
	}
	return append(out, p[start:]...)
}

const hexDigits = "0123456789abcdef"

// Print writes v as indented JSON when asJSON is set, otherwise as text
// renders it.
func Print(w io.Writer, asJSON bool, v any, text func(io.Writer)) error {
	if asJSON {
		return JSON(w, v, "  ")
	}
	text(w)
	return nil
}
