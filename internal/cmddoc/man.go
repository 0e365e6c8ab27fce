package cmddoc

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// Page is what a man page says besides its commands.
type Page struct {
	// Name is the program; Section the manual section ("1", "8").
	Name, Section string
	// Summary is the NAME line's description.
	Summary string
	// Description, Environment, Files and Exit are paragraphs (separated
	// by blank lines) of plain text.
	Description, Environment, Files, Exit string
	// SeeAlso names other pages ("systemd.service(5)").
	SeeAlso []string
}

// Man writes the man page of the commands in roff (the an macros), a
// section per command with its synopsis, help text and flags. The output
// depends on its input only (no date), so a committed copy can be compared
// with a fresh one.
func Man(w io.Writer, p Page, cs []Command) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, ".\\\" Generated from the command registry of %s; do not edit.\n", p.Name)
	fmt.Fprintf(bw, ".TH %s %s \"\" \"%s\" \"User Commands\"\n", roff(strings.ToUpper(p.Name)), p.Section, roff(p.Name))
	fmt.Fprintf(bw, ".SH NAME\n%s \\- %s\n", roff(p.Name), roff(p.Summary))
	fmt.Fprintf(bw, ".SH SYNOPSIS\n.B %s\n.I COMMAND\n.RI [ ARGS ]\n.br\n.B %s\n.I COMMAND\n.B \\-\\-help\n", roff(p.Name), roff(p.Name))
	section(bw, "DESCRIPTION", p.Description)
	fmt.Fprintln(bw, ".SH COMMANDS")
	for _, c := range cs {
		synopsis, body, _ := strings.Cut(c.Usage, "\n")
		fmt.Fprintf(bw, ".SS \"%s %s\"\n", roff(p.Name), roff(strings.ReplaceAll(synopsis, `"`, "'")))
		paragraphs(bw, c.Summary+".\n\n"+strings.TrimSpace(body))
		if len(c.Flags) > 0 {
			fmt.Fprintln(bw, ".PP\nFlags:")
		}
		for _, f := range c.Flags {
			fmt.Fprintf(bw, ".TP\n\\fB%s\\fR", roff(f.Dashed()))
			if f.Arg != "" {
				fmt.Fprintf(bw, " \\fI%s\\fR", roff(f.Arg))
			}
			fmt.Fprintln(bw)
			u := f.Usage
			if f.Default != "" && f.Arg != "" && f.Default != "0" && f.Default != "0s" {
				u += " (default " + f.Default + ")"
			}
			fmt.Fprintln(bw, roff(u))
		}
	}
	section(bw, "ENVIRONMENT", p.Environment)
	section(bw, "FILES", p.Files)
	section(bw, "EXIT STATUS", p.Exit)
	if len(p.SeeAlso) > 0 {
		refs := make([]string, len(p.SeeAlso))
		for i, s := range p.SeeAlso {
			name, sec, _ := strings.Cut(strings.TrimSuffix(s, ")"), "(")
			refs[i] = ".BR " + roff(name) + " (" + sec + ")"
		}
		fmt.Fprintf(bw, ".SH \"SEE ALSO\"\n%s\n", strings.Join(refs, ",\n"))
	}
	return bw.Flush()
}

func section(w io.Writer, title, text string) {
	if strings.TrimSpace(text) == "" {
		return
	}
	fmt.Fprintf(w, ".SH %s\n", title)
	paragraphs(w, text)
}

// paragraphs writes text's paragraphs (blank-line separated) as roff
// paragraphs; an indented line (an example) is kept as it is, unfilled.
func paragraphs(w io.Writer, text string) {
	for i, para := range strings.Split(strings.TrimSpace(text), "\n\n") {
		if i > 0 {
			fmt.Fprintln(w, ".PP")
		}
		lines := strings.Split(strings.Trim(para, "\n"), "\n")
		if strings.HasPrefix(lines[0], "    ") {
			fmt.Fprintln(w, ".nf\n.RS 4")
			for _, l := range lines {
				fmt.Fprintln(w, roff(strings.TrimPrefix(l, "    ")))
			}
			fmt.Fprintln(w, ".RE\n.fi")
			continue
		}
		for _, l := range lines {
			fmt.Fprintln(w, roff(strings.TrimSpace(l)))
		}
	}
}

// roff escapes one line of text for roff: backslashes and dashes, and a
// leading period or quote (a request) or space.
func roff(s string) string {
	s = strings.NewReplacer(`\`, `\e`, "-", `\-`).Replace(s)
	if s != "" && strings.ContainsRune(".' ", rune(s[0])) {
		s = `\&` + s
	}
	return s
}
