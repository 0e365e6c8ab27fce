// Package cmddoc turns the command line's registry (each command's name,
// summary, help text and flag set) into what shells and man read: a
// completion script for bash, zsh or fish, and a man page in roff. Both are
// generated, never written by hand, so that a flag added to a command is
// completed and documented by the next build.
//
// Limits: completion offers command names, each command's flags and the
// values of a flag whose help ends in a list ("...: auto|ebpf|proc");
// positional arguments (pids, tokens, claim ids) are left to the shell's
// file completion. The man page is plain roff (an, no tbl), one section per
// command, its text the command's help as `supervisor CMD --help` prints it.
package cmddoc

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// Command is one command of the registry.
type Command struct {
	Name string
	// Summary is one line; Usage is the synopsis, a blank line, and what
	// the command does (the help text).
	Summary, Usage string
	Flags          []Flag
}

// Flag is one flag of a command.
type Flag struct {
	Name    string
	Usage   string
	Default string
	// Arg names the flag's value ("" for a boolean flag, which takes none).
	Arg string
	// Values are the words the value may be, when the usage lists them.
	Values []string
}

// Dashed is the flag as it is usually typed: -a for a one-letter name,
// --name otherwise (the flag package takes either).
func (f Flag) Dashed() string {
	if len(f.Name) == 1 {
		return "-" + f.Name
	}
	return "--" + f.Name
}

// Flags describes every flag of fs, in name order.
func Flags(fs *flag.FlagSet) []Flag {
	var out []Flag
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			arg = ""
		}
		fl := Flag{Name: f.Name, Usage: usage, Default: f.DefValue, Arg: arg}
		if m := valueList.FindStringSubmatch(usage); m != nil {
			fl.Values = strings.Split(m[1], "|")
		}
		out = append(out, fl)
	})
	return out
}

// valueList finds a list of words a value may be at the end of a usage.
var valueList = regexp.MustCompile(`:\s*([a-z0-9-]+(?:\|[a-z0-9-]+)+)\s*$`)

// ErrShell is returned for a shell this package writes no script for.
var ErrShell = errors.New("unknown shell (want bash, zsh or fish)")

// Completion writes the completion script of prog for shell.
func Completion(w io.Writer, shell, prog string, cs []Command) error {
	switch shell {
	case "bash":
		return Bash(w, prog, cs)
	case "zsh":
		return Zsh(w, prog, cs)
	case "fish":
		return Fish(w, prog, cs)
	}
	return fmt.Errorf("%q: %w", shell, ErrShell)
}

// Shells are the shells Completion writes for.
var Shells = []string{"bash", "zsh", "fish"}

// args are the positional words a command completes from a fixed list.
func args(c Command, cs []Command) []string {
	switch c.Name {
	case "completion":
		return Shells
	case "help":
		return names(cs)
	}
	return nil
}

func names(cs []Command) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return out
}

// ident makes prog usable in a shell function name.
func ident(prog string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, prog)
}

// firstLine is the summary's first line, whitespace folded.
func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return strings.Join(strings.Fields(s), " ")
}
