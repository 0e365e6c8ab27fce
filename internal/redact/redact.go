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
// Words. An argument that holds whitespace is also matched word by word
// when no pattern matched it whole. A process may join its arguments into
// one (setproctitle does), and /proc then shows that one string; a
// shell's script is one argument too. Its words are the runs of bytes
// between ASCII whitespace (space, \t, \n, \v, \f and \r; a run of them
// is one separator, so no word is empty). The patterns see the words as
// they see the arguments of a vector, FLAG NEXT taking the word after the
// flag whatever whitespace comes between; a hidden word is replaced in
// place, the separators kept as they were: "--password=*" and "-p *" turn
// "db\t--password=hunter2" into "db\t--password=[REDACTED]" and
// "mysql -p \n hunter2" into "mysql -p \n [REDACTED]".
//
// Quotes. A word is matched as it is and also with one layer of quotes
// removed: a leading ' or " (and the same at its end), or else a trailing
// one; in NAME=VALUE its name and its value each so. The name is kept as
// written and the value is hidden to the end of the word, its quote with
// it: "\"--password=x\"" becomes "\"--password=[REDACTED]". A word that
// opens a quote and does not close it (read as a shell reads ' and ",
// without escapes; a quote that is the word's last byte, after a byte
// other than '=', is taken as closing one an earlier word opened, as in
// sh -c "mysql -p hunter2") starts a quoted value that ends with the word
// in which the quote closes (a quote reopened there goes on), or at the
// end of the argument: the words of that value are also matched as one
// (its outer quotes removed), and when the word is hidden, they all are,
// whole: "--password='two words'" becomes "--password=[REDACTED]
// [REDACTED]", "-p \"a b\"" "-p [REDACTED] [REDACTED]".
//
// What words do not catch: they are not what a shell would make of the
// text. A backslash escapes nothing (--pass\word=x, --password=a\ b and
// "a\" b" are read as written), nor are $'...' strings, variables, or a
// name made of quoted parts (--pass"word"=x) undone; one layer
// of quotes only is removed ("'--password=x'" is seen as '--password=x'
// only, which the name "--password" does not match). Whitespace other
// than ASCII (U+00A0, U+2028, ...) separates nothing, and an argument
// without ASCII whitespace is matched only as it is, quotes included. A
// quote that only looks like one (--password=it's) hides the words up to
// the next such quote, or to the end of the argument: more than the
// secret, never less. A FLAG that ends one argument is no FLAG for the
// words of the next.
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
// (a few literal bytes between stars) about the string's length. An
// argument with whitespace is read by a pattern at most about six times:
// whole, its words as written and unquoted, and the quoted values it
// holds (a byte is in at most three). Argv allocates only when it hides
// something. At most MaxPatterns patterns of MaxPatternBytes each. A redacted argument is
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
// So a claim a version before whitespace and quotes were read (words split
// at single spaces) redacted keeps what it showed: "-p [REDACTED] x" was
// -p, two spaces and x (the empty word between hidden), and
// "--password=[REDACTED] b'" was "--password='a b'"; Again cannot tell.
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
// argument that itself ends in "=" and Marker: it reads as done. In an
// argument with whitespace, a quoted value that holds a mark is matched
// by its first word only.
func (r *Rules) Again(argv []string) ([]string, bool) {
	return r.apply(argv, true, false)
}

// Marked reports whether a is what redaction leaves: Marker, or a name,
// '=' and Marker.
func Marked(a string) bool {
	return a == Marker || strings.HasSuffix(a, "="+Marker)
}

// Hides reports whether redaction left a mark in a: a is Marked, or one
// of its words (split at ASCII whitespace, as Argv splits them) is.
func Hides(a string) bool {
	if Marked(a) {
		return true
	}
	if !strings.Contains(a, Marker) {
		return false
	}
	for i := 0; i < len(a); {
		start, end := nextWord(a, i)
		if start == end {
			break
		}
		if Marked(a[start:end]) {
			return true
		}
		i = end
	}
	return false
}

// Cut returns where a view that keeps at most n bytes of a should end
// it: n, or the start of a Marker that n would split. A view cut inside a
// mark ("--password=[RED") showed a text no reader could tell from one the
// process was given, and hid that the argument had been redacted. n is
// taken as it is when it is not inside a (n <= 0, n >= len(a)).
func Cut(a string, n int) int {
	if n <= 0 || n >= len(a) {
		return n
	}
	for k := 1; k < len(Marker) && k <= n; k++ {
		if at := n - k; at+len(Marker) <= len(a) && a[at:at+len(Marker)] == Marker {
			return at
		}
	}
	return n
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
	// Arguments no pattern matched whole are matched word by word.
	for i, a := range argv {
		if out != nil && out[i] != a || !hasSpace(a) || again && Marked(a) {
			continue
		}
		if words, ok := r.words(a, again, cut && i == last); ok {
			set(i, words)
		}
	}
	if out == nil {
		return argv, false
	}
	return out, true
}

// words redacts the words of a, an argument that holds whitespace, as
// the package comment tells; again and cut as apply's. It returns a with
// its hidden words replaced and its separators kept, and whether any
// word was hidden; it allocates only then.
func (r *Rules) words(a string, again, cut bool) (string, bool) {
	var b strings.Builder
	copied := -1  // a[:copied] is in b; -1: nothing hidden yet
	var prev word // the word before, for FLAG NEXT ("" at the start)
	span := 0     // a word that starts before span is in a hidden quote
	for i := 0; ; {
		start, end := nextWord(a, i)
		if start == end {
			break
		}
		i = end
		w := word{text: a[start:end], cut: cut && end == len(a)}
		closed := end // where the quote w opens is closed
		if at := opens(w.text); at >= 0 {
			closed = closes(a, start+at)
			w.ext, w.extCut = a[start:closed], cut && closed == len(a)
			if again && Hides(w.ext) {
				// Its quoted value was redacted before: that text
				// is not what Argv matched, so it is not matched
				// (Again(Argv(x)) is Argv(x)).
				w.ext = ""
			}
		}
		name, hide := r.hides(&prev, &w, again)
		prev = w
		if start < span && !(again && Marked(w.text)) {
			// In a quote a hidden word opened: hidden whole. (A
			// quote this word seems to open is read from outside
			// quotes, which it is not in: it does not count.)
			name, hide = "", true
		} else if hide && closed > span {
			span = closed
		}
		if !hide {
			continue
		}
		if copied < 0 {
			b.Grow(len(a) + len(Marker))
			copied = 0
		}
		b.WriteString(a[copied:start])
		if name != "" {
			b.WriteString(name)
			b.WriteByte('=')
		}
		b.WriteString(Marker)
		copied = end
	}
	if copied < 0 {
		return a, false
	}
	b.WriteString(a[copied:])
	return b.String(), true
}

// word is one word of an argument as the patterns see it.
type word struct {
	text   string // the word
	ext    string // the word and those its open quote spans, "" when none
	cut    bool   // text reaches the end of a cut argument
	extCut bool   // ext does (its quote was not closed before the cut)
}

// match reports whether g matches the word, with one layer of quotes
// removed, or all that its quote spans, quotes removed.
func (w *word) match(g glob) bool {
	return matchQuoted(g, w.text, w.cut) || w.ext != "" && g.matchAs(unquote(w.ext), w.extCut)
}

// hides reports whether the patterns hide w, prev being the word before
// it: whole, or (name != "") all after name and its '='.
func (r *Rules) hides(prev, w *word, again bool) (name string, hide bool) {
	if again && Marked(w.text) {
		return "", false
	}
	for pi := range r.pats {
		p := &r.pats[pi]
		switch p.form {
		case whole:
			if w.match(p.a) {
				return "", true
			}
		case value:
			n, v, ok := strings.Cut(w.text, "=")
			if !ok || hide || !matchQuoted(p.a, n, false) {
				continue
			}
			if matchQuoted(p.b, v, w.cut) || w.ext != "" && p.b.matchAs(unquote(w.ext[len(n)+1:]), w.extCut) {
				name, hide = n, true // a whole match below still wins
			}
		case next:
			if prev.text != "" && !(again && Marked(prev.text)) && matchQuoted(p.a, prev.text, false) && w.match(p.b) {
				return "", true
			}
		}
	}
	return name, hide
}

// matchQuoted reports whether g matches s, or s with one layer of quotes
// removed; as a prefix when cut.
func matchQuoted(g glob, s string, cut bool) bool {
	if g.matchAs(s, cut) {
		return true
	}
	u := unquote(s)
	return len(u) != len(s) && g.matchAs(u, cut)
}

// unquote removes one layer of quotes from s: a leading ' or " and the
// same at its end, or else a trailing one alone (the end of a quote
// opened in an earlier word).
func unquote(s string) string {
	if s == "" {
		return s
	}
	if c := s[0]; c == '\'' || c == '"' {
		s = s[1:]
		if n := len(s); n > 0 && s[n-1] == c {
			s = s[:n-1]
		}
		return s
	}
	if c := s[len(s)-1]; c == '\'' || c == '"' {
		return s[:len(s)-1]
	}
	return s
}

// opens returns the index in w of a quote that w opens and does not
// close, read as a shell reads ' and " (each open until the same byte
// again; no backslash escapes), -1 when none. A quote that is w's last
// byte, after a byte other than '=', is taken as closing one opened in
// an earlier word (the end of sh -c "mysql -p hunter2"), so none.
func opens(w string) int {
	var q byte
	at := -1
	for i := 0; i < len(w); i++ {
		switch c := w[i]; {
		case q == 0 && (c == '\'' || c == '"'):
			q, at = c, i
		case c == q:
			q = 0
		}
	}
	if q == 0 || at == len(w)-1 && at > 0 && w[at-1] != '=' {
		return -1
	}
	return at
}

// closes returns the end of the word of a in which the quote opened at
// a[at] is closed, read as opens reads (a quote reopened in that word
// goes on: 'a b'"c d" is one), or len(a) when it never is.
//
// Cost: read a from its start three times, outside quotes, in ' and in
// ": each byte permutes the three states, so at every byte the three
// readings are in three different states. The quote a word opens goes on
// the reading that is outside quotes where the word starts (its words
// start after whitespace), and closes scans to where that reading is
// outside again at a word's end; another word that opens a quote before
// then is on another reading. So the spans of one reading do not
// overlap, a byte is in at most three spans, and closes reads an
// argument at most three times over.
func closes(a string, at int) int {
	q := a[at]
	for i := at + 1; i < len(a); i++ {
		switch c := a[i]; {
		case q == 0 && isSpace(c):
			return i
		case q == 0 && (c == '\'' || c == '"'):
			q = c
		case c == q:
			q = 0
		}
	}
	return len(a)
}

// isSpace reports whether c is ASCII whitespace: space, \t, \n, \v, \f
// or \r.
func isSpace(c byte) bool { return c == ' ' || c-'\t' <= '\r'-'\t' }

// hasSpace reports whether s holds ASCII whitespace.
func hasSpace(s string) bool {
	for i := 0; i < len(s); i++ {
		if isSpace(s[i]) {
			return true
		}
	}
	return false
}

// nextWord returns the bounds of the first word of s at or after i (a run
// of bytes that are not whitespace); start == end when there is none.
func nextWord(s string, i int) (start, end int) {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	start = i
	for i < len(s) && !isSpace(s[i]) {
		i++
	}
	return start, i
}
