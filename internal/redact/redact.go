// Package redact hides secrets in argument vectors before they are logged
// or streamed, by patterns the administrator configures (the daemon's
// redact_args).
//
// Patterns. Each pattern is one of three forms, made of globs:
//
//	NAME=VALUE   an argument NAME=VALUE (split at its first '=') whose name
//	             matches NAME and whose value matches VALUE keeps its name:
//	             "--password=*" turns --password=hunter2 into
//	             --password=[REDACTED]
//	FLAG NEXT    (one space) the argument after one that matches FLAG is
//	             replaced whole when it matches NEXT: "-p *" turns -p hunter2
//	             into -p [REDACTED]
//	GLOB         an argument that matches GLOB is replaced whole: "ghp_*"
//
// An argument that holds spaces is also matched word by word when no
// pattern matched it whole: its words (split at each space) are redacted
// as a vector of their own and joined again, so "--password=*" turns the
// one argument "db --password=hunter2" into "db --password=[REDACTED]".
// A process may join its arguments into one (setproctitle does), and
// /proc then shows that one string; a shell's script is one argument too.
//
// A glob matches a whole string: '*' matches any run of bytes (slashes,
// '=' and spaces included), '?' any one byte, and a backslash makes the
// next byte literal (write "\*", "\?", "\\", "\=" and "\ " for those
// bytes). There are no character classes; matching is case-sensitive.
// The '=' and the space that split the first two forms are the first
// unescaped ones.
//
// Cost and limits. Matching never backtracks more than one star: a glob
// against a string costs at most their lengths multiplied, and in practice
// (a few literal bytes between stars) about the string's length. At most
// MaxPatterns patterns of MaxPatternBytes each. A redacted argument is
// replaced by Marker (after NAME= in the first form); the count of
// arguments never changes, so the caller can mark the vector redacted and
// keep its original count and size. A vector cut at a bound goes through
// ArgvCut, which also hides a last argument that may be the start of one
// a pattern matches (a secret cut in the middle).
//
// Where the rules apply. An argument vector is redacted where it enters
// something that outlives the request or that another user sees, never
// where it is used: the workload is exec'd with the argv of its request,
// which lives only in memory for that call. The daemon redacts a claim's
// argv before the store writes it, so the state directory never holds the
// secret and every view of the claim (list, show, the API, log lines)
// reads the one redacted copy; the tracker redacts an exec's arguments
// before the log feed, the event stream and the exec cache see them; the
// daemon's tree redacts the command lines it reads from /proc. A claim
// stored earlier (by a daemon without these patterns, or before this
// redaction existed) goes through Again when the daemon opens its store
// (which is then compacted, so no freed page keeps the old bytes) and
// whenever it is shown: what a marker already stands in stays as it is.
// Redacting where the data enters, not at each view, means a view the
// code grows later cannot forget to; the views' own pass is for records
// the rewrite had to keep.
package redact

import (
	"errors"
	"fmt"
	"strings"
)

// Marker replaces what a pattern hides.
const Marker = "[REDACTED]"

// Bounds of a rule set.
const (
	MaxPatterns     = 64
	MaxPatternBytes = 256
)

// ErrPattern wraps every error about a pattern that cannot be used.
var ErrPattern = errors.New("invalid redaction pattern")

type form uint8

const (
	whole form = iota // GLOB
	value             // NAME=VALUE
	next              // FLAG NEXT
)

// pattern is one parsed pattern: globs are kept as pieces (see glob).
type pattern struct {
	form     form
	a, b     glob // GLOB / NAME, VALUE / FLAG, NEXT
	original string
}

// Rules is a parsed set of patterns. The zero value and nil redact
// nothing. It is safe for concurrent use.
type Rules struct {
	pats []pattern
}

// Parse parses patterns. Errors wrap ErrPattern and name the pattern.
func Parse(patterns []string) (*Rules, error) {
	if len(patterns) > MaxPatterns {
		return nil, fmt.Errorf("%d patterns (at most %d): %w", len(patterns), MaxPatterns, ErrPattern)
	}
	r := &Rules{}
	for _, s := range patterns {
		p, err := parse(s)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", s, err)
		}
		r.pats = append(r.pats, p)
	}
	return r, nil
}

// Patterns returns the patterns r was parsed from.
func (r *Rules) Patterns() []string {
	if r == nil {
		return nil
	}
	out := make([]string, len(r.pats))
	for i, p := range r.pats {
		out[i] = p.original
	}
	return out
}

// Empty reports whether r redacts nothing.
func (r *Rules) Empty() bool { return r == nil || len(r.pats) == 0 }

func parse(s string) (pattern, error) {
	if s == "" {
		return pattern{}, fmt.Errorf("empty: %w", ErrPattern)
	}
	if len(s) > MaxPatternBytes {
		return pattern{}, fmt.Errorf("%d bytes (at most %d): %w", len(s), MaxPatternBytes, ErrPattern)
	}
	n := len(s) - len(strings.TrimRight(s, `\`))
	if n%2 == 1 {
		return pattern{}, fmt.Errorf("ends in a lone backslash: %w", ErrPattern)
	}
	p := pattern{original: s}
	sp, eq := split(s, ' '), split(s, '=')
	switch {
	case sp >= 0:
		if split(s[sp+1:], ' ') >= 0 {
			return pattern{}, fmt.Errorf("more than one unescaped space (escape a literal one as \"\\ \"): %w", ErrPattern)
		}
		p.form, p.a, p.b = next, compile(s[:sp]), compile(s[sp+1:])
		if s[:sp] == "" || s[sp+1:] == "" {
			return pattern{}, fmt.Errorf("FLAG NEXT with an empty side: %w", ErrPattern)
		}
	case eq >= 0:
		p.form, p.a, p.b = value, compile(s[:eq]), compile(s[eq+1:])
	default:
		p.form, p.a = whole, compile(s)
	}
	return p, nil
}

// split returns the index of the first unescaped c in s, -1 when none.
func split(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case c:
			return i
		}
	}
	return -1
}

// Argv returns argv with what the rules match replaced, and whether
// anything was. argv itself is never modified: the result is a new slice
// when something changed (the only allocation), argv otherwise.
func (r *Rules) Argv(argv []string) ([]string, bool) {
	return r.apply(argv, false, false)
}

// ArgvCut is Argv for a vector cut short at a bound (an exec's arguments
// past the capture's bound, events.ExecInfo.ArgsTruncated): its last
// argument may be the start of one a pattern matches whole, so it is
// hidden when a pattern matches some argument that begins with it. With
// "AKIA????????????????" the cut "AKIAABCDEFGHIJKL" is hidden as
// "AKIAABCDEFGHIJKLMNOP" is; with "--key=????????" the value of a cut
// "--key=ABCD"; with "-p ????????" the cut "hunt" after "-p". An argument
// no pattern can match however it goes on is kept.
func (r *Rules) ArgvCut(argv []string) ([]string, bool) {
	return r.apply(argv, false, true)
}

// Again redacts an argv that was redacted before (by these rules or by
// earlier ones, as a stored claim's was): an argument a marker already
// stands in (Marker, or NAME= followed by Marker) is kept as it is and
// is no FLAG for the argument after it; the others are matched as Argv
// matches them. So Again(Argv(x)) is Argv(x): a redacted vector is never
// redacted into something different, while a pattern added since still
// hides what it matches. The one thing Again cannot do is redact an
// argument that itself ends in "=" and Marker: it reads as done.
func (r *Rules) Again(argv []string) ([]string, bool) {
	return r.apply(argv, true, false)
}

// Marked reports whether a is what redaction leaves: Marker, or a name,
// '=' and Marker.
func Marked(a string) bool {
	return a == Marker || strings.HasSuffix(a, "="+Marker)
}

// Hides reports whether redaction left a mark in a: a is Marked, or one
// of its words (split at spaces) is.
func Hides(a string) bool {
	if Marked(a) {
		return true
	}
	if !strings.Contains(a, Marker) {
		return false
	}
	for w := range strings.SplitSeq(a, " ") {
		if Marked(w) {
			return true
		}
	}
	return false
}

// apply redacts argv; again as Again does, cut as ArgvCut does.
func (r *Rules) apply(argv []string, again, cut bool) ([]string, bool) {
	if r.Empty() {
		return argv, false
	}
	var out []string
	set := func(i int, v string) {
		if out != nil && out[i] == Marker {
			return // replaced whole: another pattern must not show its name
		}
		if out == nil {
			out = make([]string, len(argv))
			copy(out, argv)
		}
		out[i] = v
	}
	// matches reports whether g matches the argument at i: whole, or,
	// for the last one of a cut vector, what it may have been.
	last := len(argv) - 1
	matches := func(g glob, i int, s string) bool {
		if cut && i == last {
			return g.matchPrefix(s)
		}
		return g.match(s)
	}
	for i, a := range argv {
		if again && Hides(a) {
			// Marked whole, or a word of it (its other words are
			// matched below).
			continue
		}
		for pi := range r.pats {
			p := &r.pats[pi]
			switch p.form {
			case whole:
				if matches(p.a, i, a) {
					set(i, Marker)
				}
			case value:
				// The name is whole: the '=' after it was not cut.
				name, val, ok := strings.Cut(a, "=")
				if ok && p.a.match(name) && matches(p.b, i, val) {
					set(i, name+"="+Marker)
				}
			case next:
				if i+1 < len(argv) && !(again && Hides(argv[i+1])) && p.a.match(a) && matches(p.b, i+1, argv[i+1]) {
					set(i+1, Marker)
				}
			}
		}
	}
	// Arguments no pattern matched whole are matched word by word. The
	// words hold no space: this recurses once.
	for i, a := range argv {
		if out != nil && out[i] != a || !strings.Contains(a, " ") || again && Marked(a) {
			continue
		}
		if words, ok := r.apply(strings.Split(a, " "), again, cut && i == last); ok {
			set(i, strings.Join(words, " "))
		}
	}
	if out == nil {
		return argv, false
	}
	return out, true
}
