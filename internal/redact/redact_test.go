package redact

import (
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestArgv(t *testing.T) {
	tests := []struct {
		pats       []string
		argv, want []string
	}{
		{[]string{"--password=*"}, []string{"db", "--password=hunter2", "--user=x"}, []string{"db", "--password=[REDACTED]", "--user=x"}},
		{[]string{"--password=*"}, []string{"db", "--password=a=b", "--password"}, []string{"db", "--password=[REDACTED]", "--password"}},
		{[]string{"-p *"}, []string{"mysql", "-u", "root", "-p", "hunter2"}, []string{"mysql", "-u", "root", "-p", "[REDACTED]"}},
		{[]string{"-p *"}, []string{"mysql", "-p"}, []string{"mysql", "-p"}},
		{[]string{"*token*=*"}, []string{"x", "--api-token=abc", "TOKEN=x", "--x=token=abc"}, []string{"x", "--api-token=[REDACTED]", "TOKEN=x", "--x=token=abc"}},
		{[]string{"ghp_*"}, []string{"gh", "ghp_123", "xghp_1"}, []string{"gh", "[REDACTED]", "xghp_1"}},
		{[]string{"a?c"}, []string{"abc", "ac", "abbc", "a/c"}, []string{"[REDACTED]", "ac", "abbc", "[REDACTED]"}},
		{[]string{`\*`}, []string{"*", "x"}, []string{"[REDACTED]", "x"}},
		{[]string{`a\ b`}, []string{"a b", "a"}, []string{"[REDACTED]", "a"}},
		{[]string{`a\=b=*`}, []string{"a=b=c"}, []string{"a=b=c"}}, // the name is "a", not "a=b"
		{[]string{`--key\=x`}, []string{"--key=x", "--key=y"}, []string{"[REDACTED]", "--key=y"}},
		{[]string{"--pw *", "*"}, []string{"--pw", "x"}, []string{"[REDACTED]", "[REDACTED]"}},
		// A whole replacement is never undone into NAME=[REDACTED]: the
		// name may be the secret.
		{[]string{"*hunter2*", "*=*"}, []string{"--hunter2=v"}, []string{"[REDACTED]"}},
		{[]string{"*=*", "*hunter2*"}, []string{"--hunter2=v"}, []string{"[REDACTED]"}},
		{[]string{"-p *", "*=*"}, []string{"-p", "a=b"}, []string{"-p", "[REDACTED]"}},
		{nil, []string{"--password=x"}, []string{"--password=x"}},
		{[]string{"--password=*"}, nil, nil},
		{[]string{"--password=*"}, []string{"--password=", "é=\xff"}, []string{"--password=[REDACTED]", "é=\xff"}},
		// Arguments a process joined into one (setproctitle), and a
		// shell's script: matched word by word, joined again.
		{[]string{"--password=*"}, []string{"/tmp/title 1 20 --password=F2SECRET"}, []string{"/tmp/title 1 20 --password=[REDACTED]"}},
		{[]string{"-p *"}, []string{"sh", "-c", "mysql -p hunter2 db"}, []string{"sh", "-c", "mysql -p [REDACTED] db"}},
		{[]string{"ghp_*"}, []string{"x ghp_1  y", "ghp_2 z"}, []string{"x [REDACTED]  y", "[REDACTED]"}}, // '*' takes spaces
		{[]string{"--pw *"}, []string{"run --pw secret now"}, []string{"run --pw [REDACTED] now"}},
		{[]string{"*hunter2*"}, []string{"a hunter2 b"}, []string{"[REDACTED]"}}, // whole first
		{[]string{"ghp_*"}, []string{"x y", " "}, []string{"x y", " "}},
	}
	for _, tt := range tests {
		r, err := Parse(tt.pats)
		if err != nil {
			t.Fatalf("Parse(%q) = %v", tt.pats, err)
		}
		in := slices.Clone(tt.argv)
		got, changed := r.Argv(in)
		if !slices.Equal(got, tt.want) || changed != !slices.Equal(tt.argv, tt.want) {
			t.Errorf("Argv(%q) with %q = %q, %v; want %q", tt.argv, tt.pats, got, changed, tt.want)
		}
		if !slices.Equal(in, tt.argv) {
			t.Errorf("Argv(%q) modified its input: %q", tt.argv, in)
		}
	}
}

// TestArgvWords: an argument with whitespace is split into words at every
// ASCII whitespace byte (the separators kept as they were), a FLAG's NEXT
// is the next word however many separators come between, and a word is
// matched also with one layer of quotes removed; a quoted value that
// spans words is hidden up to the word that closes its quote. Each case
// is a single argument; changed must be true exactly when it is
// rewritten, and Hides must see what the rewrite left.
func TestArgvWords(t *testing.T) {
	pats := []string{"--password=*", "-p *"}
	tests := []struct{ name, arg, want string }{
		// The rows the audit found in the log feed.
		{"tab", "sh\t--password=tabsecret1", "sh\t--password=[REDACTED]"},
		{"newline", "mysql\n--password=nlsecret2", "mysql\n--password=[REDACTED]"},
		{"quoted", `mysql "--password=quoted4"`, `mysql "--password=[REDACTED]`},
		{"quoted span", `mysql --password='two words3'`, `mysql --password=[REDACTED] [REDACTED]`},
		{"two spaces", "mysql -p  dblspace5", "mysql -p  [REDACTED]"},
		// Whitespace between a flag and its value.
		{"flag tab", "mysql -p\thunter2 db", "mysql -p\t[REDACTED] db"},
		{"flag newline", "mysql -p\nhunter2", "mysql -p\n[REDACTED]"},
		{"flag run", "mysql -p \t\r\n\v\f hunter2\tdb", "mysql -p \t\r\n\v\f [REDACTED]\tdb"},
		{"flag crlf", "mysql\r\n-p\r\nhunter2\r\n", "mysql\r\n-p\r\n[REDACTED]\r\n"},
		{"value vt ff", "a\v--password=x\fb", "a\v--password=[REDACTED]\fb"},
		// Quotes: surrounding, leading, trailing; a span across
		// separators of any kind; the flag quoted too.
		{"flag quoted value", `mysql -p 'hunter2' db`, `mysql -p [REDACTED] db`},
		{"flag quoted span", "mysql -p \"two\twords\" db", "mysql -p [REDACTED]\t[REDACTED] db"},
		{"quoted flag", `mysql '-p' hunter2`, `mysql '-p' [REDACTED]`},
		{"quoted script", `sh -c "mysql -p hunter2"`, `sh -c "mysql -p [REDACTED]`},
		{"quoted whole span", `x "--password=a b c" d`, `x "--password=[REDACTED] [REDACTED] [REDACTED] d`},
		{"quoted value span", `x --password="a  b" d`, `x --password=[REDACTED]  [REDACTED] d`},
		{"quote after =", `x --password=' a' d`, `x --password=[REDACTED] [REDACTED] d`},
		{"span to end", `x --password='a b c`, `x --password=[REDACTED] [REDACTED] [REDACTED]`},
		{"span mixed quotes", `x --password='a b'"c d" e`, `x --password=[REDACTED] [REDACTED] [REDACTED] e`},
		{"closing quote", `x "--password=a" "b c"`, `x "--password=[REDACTED] "b c"`},
		// Nothing hidden: no false mark.
		{"no match", "a\tb  c\n", "a\tb  c\n"},
		{"flag last", "mysql\t-p", "mysql\t-p"},
		{"flag then spaces", "mysql -p \t", "mysql -p \t"},
		{"only whitespace", " \t\n", " \t\n"},
		{"unicode space", "mysql\u00a0--password=x", "mysql\u00a0--password=x"}, // not ASCII whitespace
	}
	r, err := Parse(pats)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			argv := []string{"cmd", tt.arg}
			got, changed := r.Argv(slices.Clone(argv))
			if got[1] != tt.want || changed != (tt.arg != tt.want) {
				t.Errorf("Argv(%q) = %q, %v; want %q, %v", tt.arg, got[1], changed, tt.want, tt.arg != tt.want)
			}
			if Hides(got[1]) != (tt.arg != tt.want) {
				t.Errorf("Hides(%q) = %v after Argv(%q)", got[1], Hides(got[1]), tt.arg)
			}
			if again, ch := r.Again(got); !slices.Equal(again, got) || ch {
				t.Errorf("Again(%q) = %q, %v; want it kept", got, again, ch)
			}
		})
	}
}

// TestArgvWordsCut: in a cut vector only the word that reaches the end of
// the last argument may be cut; a quote it opens runs to the cut.
func TestArgvWordsCut(t *testing.T) {
	r, err := Parse([]string{"--key=????????", "-p ????????"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ arg, want string }{
		{"db\t--key=ABCD", "db\t--key=[REDACTED]"},
		{"db -p\n\thunt", "db -p\n\t[REDACTED]"},
		{"db -p 'hun", "db -p [REDACTED]"},
		{"db -p 'a b", "db -p [REDACTED] [REDACTED]"}, // "a b" is no match when whole, but it was cut
		{"db -p \t", "db -p \t"},                      // nothing after the flag was kept
		{"db\t--key=ABCD x", "db\t--key=ABCD x"},      // not the last word
	}
	for _, tt := range tests {
		got, changed := r.ArgvCut([]string{"x", tt.arg})
		if got[1] != tt.want || changed != (tt.arg != tt.want) {
			t.Errorf("ArgvCut(%q) = %q, %v; want %q", tt.arg, got[1], changed, tt.want)
		}
	}
}

// TestHides: Hides finds a mark in any word, whatever whitespace splits
// them, and only a mark redaction leaves.
func TestHides(t *testing.T) {
	for a, want := range map[string]bool{
		Marker:                           true,
		"--password=" + Marker:           true,
		"a " + Marker:                    true,
		"a\t" + Marker:                   true,
		"a\n--password=" + Marker + "\r": true,
		`"--password=` + Marker:          true,
		"a" + Marker:                     false,
		"a " + Marker + "x":              false,
		"a b":                            false,
		"":                               false,
	} {
		if got := Hides(a); got != want {
			t.Errorf("Hides(%q) = %v, want %v", a, got, want)
		}
	}
}

// TestAgain: a stored argv, redacted before, is redacted again by the
// rules of today without changing what a marker already stands in.
func TestAgain(t *testing.T) {
	tests := []struct {
		pats       []string
		argv, want []string
	}{
		// Redacted by these rules: nothing changes.
		{[]string{"--password=*"}, []string{"db", "--password=[REDACTED]"}, []string{"db", "--password=[REDACTED]"}},
		// A pattern that would turn a marked argument into another one.
		{[]string{"--password=\\[*"}, []string{"--password=[REDACTED]"}, []string{"--password=[REDACTED]"}},
		{[]string{"*"}, []string{"[REDACTED]", "x=[REDACTED]", "y"}, []string{"[REDACTED]", "x=[REDACTED]", "[REDACTED]"}},
		// A marked argument is no FLAG, and is not replaced as a NEXT.
		{[]string{"\\[REDACTED\\] *"}, []string{"[REDACTED]", "hunter2"}, []string{"[REDACTED]", "hunter2"}},
		{[]string{"-p *"}, []string{"-p", "a=[REDACTED]"}, []string{"-p", "a=[REDACTED]"}},
		// A pattern added since hides what it matches in the rest.
		{[]string{"--password=*", "-p *"}, []string{"db", "--password=[REDACTED]", "-p", "hunter2"}, []string{"db", "--password=[REDACTED]", "-p", "[REDACTED]"}},
		// Word by word: a marked word stays, a pattern added since
		// hides its other words; a whole pattern does not take the
		// marked argument.
		{[]string{"--password=*", "-p *"}, []string{"a --password=[REDACTED] -p x"}, []string{"a --password=[REDACTED] -p [REDACTED]"}},
		{[]string{"*]"}, []string{"a --password=[REDACTED]"}, []string{"a --password=[REDACTED]"}},
		// Words split at any whitespace, quotes read: a quoted value
		// that holds a mark keeps it, its other words are hidden.
		{[]string{"--password=*", "-p *"}, []string{"a\t--password=[REDACTED]\n-p\t\tx"}, []string{"a\t--password=[REDACTED]\n-p\t\t[REDACTED]"}},
		{[]string{"--password=*", "-p *"}, []string{"a -p 'x --password=[REDACTED] y' z"}, []string{"a -p [REDACTED] --password=[REDACTED] [REDACTED] z"}},
		{[]string{"--password=*"}, []string{`a "--password=[REDACTED] "--password=b"`}, []string{`a "--password=[REDACTED] "--password=[REDACTED]`}},
		{nil, []string{"--password=x"}, []string{"--password=x"}},
	}
	for _, tt := range tests {
		r, err := Parse(tt.pats)
		if err != nil {
			t.Fatalf("Parse(%q) = %v", tt.pats, err)
		}
		got, changed := r.Again(slices.Clone(tt.argv))
		if !slices.Equal(got, tt.want) || changed != !slices.Equal(tt.argv, tt.want) {
			t.Errorf("Again(%q) with %q = %q, %v; want %q", tt.argv, tt.pats, got, changed, tt.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, p := range []string{"", "a b c", " x", "x ", `x\`, `a\\\`, strings.Repeat("a", MaxPatternBytes+1)} {
		if _, err := Parse([]string{p}); !errors.Is(err, ErrPattern) {
			t.Errorf("Parse(%q) = %v, want ErrPattern", p, err)
		}
	}
	if _, err := Parse(make([]string, MaxPatterns+1)); !errors.Is(err, ErrPattern) {
		t.Errorf("Parse(%d patterns) = %v, want ErrPattern", MaxPatterns+1, err)
	}
	for _, p := range []string{`a\ b c`, `x\\`, "*", "=", "a=", "=b", `\ `} {
		if _, err := Parse([]string{p}); err != nil {
			t.Errorf("Parse(%q) = %v, want nil", p, err)
		}
	}
}

// reference is the glob as a regular expression (RE2: linear time), the
// model the matcher is fuzzed against. Each byte of g stands for the rune
// of the same value: match it against latin1 of the text.
func reference(g string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString(`(?s)\A`)
	for i := 0; i < len(g); i++ {
		switch c := g[i]; {
		case c == '\\' && i+1 < len(g):
			i++
			b.WriteString(regexp.QuoteMeta(string(rune(g[i]))))
		case c == '*':
			b.WriteString(`.*`)
		case c == '?':
			b.WriteString(`.`)
		default:
			b.WriteString(regexp.QuoteMeta(string(rune(c))))
		}
	}
	b.WriteString(`\z`)
	return regexp.MustCompile(b.String())
}

func FuzzGlob(f *testing.F) {
	for _, c := range [][2]string{{"*token*", "--api-token"}, {"a?c", "abc"}, {`\*x*`, "*xy"}, {"**a*b", "aab"}, {"*a*a*a*b", strings.Repeat("a", 300)}} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, g, s string) {
		if len(g) > MaxPatternBytes {
			return
		}
		// The reference works on runes: compare on bytes by mapping both
		// to Latin-1 first, so that '?' is one byte in both.
		got := compile(g).match(s)
		want := reference(g).MatchString(latin1(s))
		if got != want {
			t.Errorf("glob %q match %q = %v, want %v", g, s, got, want)
		}
		got = compile(g).matchPrefix(s)
		want = prefixReference(compile(g)).MatchString(latin1(s))
		if got != want {
			t.Errorf("glob %q matchPrefix %q = %v, want %v", g, s, got, want)
		}
	})
}

// prefixReference is the model of matchPrefix: s begins a string g
// matches when some first tokens of g match all of s (those left match
// what follows: a literal its byte, '?' any, '*' nothing).
func prefixReference(g glob) *regexp.Regexp {
	var b strings.Builder
	b.WriteString(`(?s)\A(?:`)
	for k := 0; k <= len(g); k++ {
		if k > 0 {
			b.WriteByte('|')
		}
		for _, t := range g[:k] {
			switch t.kind {
			case '*':
				b.WriteString(`.*`)
			case '?':
				b.WriteString(`.`)
			default:
				b.WriteString(regexp.QuoteMeta(string(rune(t.c))))
			}
		}
	}
	b.WriteString(`)\z`)
	return regexp.MustCompile(b.String())
}

// TestArgvCut: the last argument of a cut vector is hidden when a pattern
// matches some argument that begins with it (the daemon with argv_max 64
// logged AKIAABCDEFGHIJKL, --key=ABCDEFGHIJKL and hunter2hun, the start
// of secrets its patterns hide whole); the others, and an argument no
// pattern can match however it goes on, are matched as Argv does.
func TestArgvCut(t *testing.T) {
	pats := []string{"AKIA????????????????", "--key=????????????????????", "-p ????????????", "--token=*secret"}
	r, err := Parse(pats)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ argv, want []string }{
		{[]string{"x", "AKIAABCDEFGHIJKL"}, []string{"x", Marker}},
		{[]string{"x", "--key=ABCDEFGHIJKL"}, []string{"x", "--key=" + Marker}},
		{[]string{"x", "-p", "hunter2hun"}, []string{"x", "-p", Marker}},
		{[]string{"x", "--token=b"}, []string{"x", "--token=" + Marker}}, // --token=b...secret
		{[]string{"x", "-p"}, []string{"x", "-p"}},
		{[]string{"x", "db --key=ABCDEFGHIJKL"}, []string{"x", "db --key=" + Marker}}, // a joined command line cut
		{[]string{"AKIA", "x", "AKIB"}, []string{"AKIA", "x", "AKIB"}},
		{[]string{"x", "--key=ABCDEFGHIJKLMNOPQRSTU"}, []string{"x", "--key=ABCDEFGHIJKLMNOPQRSTU"}}, // longer than any match
		{[]string{"x", "--ke"}, []string{"x", "--ke"}},                                               // the name cut: no value shown
		{[]string{"-p", "hunter2hun", "y"}, []string{"-p", "hunter2hun", "y"}},                       // not the last
		{nil, nil},
	}
	for _, tt := range tests {
		got, changed := r.ArgvCut(slices.Clone(tt.argv))
		if !slices.Equal(got, tt.want) || changed != !slices.Equal(tt.argv, tt.want) {
			t.Errorf("ArgvCut(%q) = %q, %v; want %q", tt.argv, got, changed, tt.want)
		}
	}
	if got, _ := r.Argv([]string{"x", "AKIAABCDEFGHIJKL"}); got[1] != "AKIAABCDEFGHIJKL" {
		t.Errorf("Argv hides a whole argument no pattern matches: %q", got)
	}
}

// latin1 maps each byte of s to the rune of the same value.
func latin1(s string) string {
	r := make([]rune, len(s))
	for i := 0; i < len(s); i++ {
		r[i] = rune(s[i])
	}
	return string(r)
}

// FuzzArgv checks, for any patterns and arguments: Parse never panics;
// the vector keeps its length; an argument is either kept, replaced by
// Marker, or becomes its own name followed by "=" and Marker; and a
// whole-form pattern that matches an argument hides all of it.
func FuzzArgv(f *testing.F) {
	f.Add("--password=*", "-p *", "db\x00--password=hunter2\x00-p\x00hunter2")
	f.Add("*token*=*", "ghp_*", "gh\x00ghp_x\x00--my-token=t\x00=\x00")
	f.Add(`a\ b`, `\\*`, "a b\x00\\\x00\\x")
	f.Add("--password=*", `--password=\[*`, "--password=hunter2\x00-p\x00[REDACTED]")
	f.Fuzz(func(t *testing.T, p1, p2, args string) {
		r, err := Parse([]string{p1, p2})
		if err != nil {
			if !errors.Is(err, ErrPattern) {
				t.Fatalf("Parse error %v does not wrap ErrPattern", err)
			}
			return
		}
		argv := strings.Split(args, "\x00")
		got, changed := r.Argv(argv)
		if len(got) != len(argv) {
			t.Fatalf("Argv(%q) = %q: length changed", argv, got)
		}
		if changed == slices.Equal(got, argv) && !slices.ContainsFunc(argv, Hides) {
			t.Fatalf("Argv(%q) = %q, changed %v", argv, got, changed)
		}
		for i, a := range got {
			if !redactedAs(argv[i], a) {
				t.Fatalf("Argv(%q)[%d] = %q: neither kept nor redacted", argv, i, a)
			}
			if a != argv[i] && !Hides(a) {
				t.Fatalf("Argv(%q)[%d] = %q: Hides does not see it", argv, i, a)
			}
		}
		keptWords(t, r, argv, got)
		// Redacting the result again changes nothing; with no marker in
		// argv, Again is Argv.
		if again, _ := r.Again(got); !slices.Equal(again, got) {
			t.Fatalf("Again(Argv(%q)) = %q, want %q", argv, again, got)
		}
		if !slices.ContainsFunc(argv, Hides) {
			if again, _ := r.Again(argv); !slices.Equal(again, got) {
				t.Fatalf("Again(%q) = %q, want Argv's %q", argv, again, got)
			}
		}
		for _, p := range r.pats {
			if p.form != whole {
				continue
			}
			for i, a := range argv {
				if p.a.match(a) && got[i] != Marker {
					t.Fatalf("pattern %q matches %q but Argv gives %q", p.original, a, got[i])
				}
			}
		}
		// A cut vector hides all that Argv hides, and its last argument
		// when a whole pattern could match what it was cut from.
		cut, _ := r.ArgvCut(argv)
		last := len(argv) - 1
		if len(cut) != len(argv) {
			t.Fatalf("ArgvCut(%q) = %q: length changed", argv, cut)
		}
		for i := range argv {
			if got[i] != argv[i] && cut[i] != got[i] && cut[i] != Marker && (i != last || !redactedAs(argv[i], cut[i])) {
				t.Fatalf("ArgvCut(%q)[%d] = %q, Argv hid it as %q", argv, i, cut[i], got[i])
			}
			if cut[i] != argv[i] && !Hides(cut[i]) {
				t.Fatalf("ArgvCut(%q)[%d] = %q: Hides does not see it", argv, i, cut[i])
			}
		}
		for _, p := range r.pats {
			if p.form == whole && p.a.matchPrefix(argv[last]) && cut[last] != Marker {
				t.Fatalf("pattern %q may match what %q was cut from, but ArgvCut gives %q", p.original, argv[last], cut[last])
			}
		}
	})
}

// redactedAs reports whether a is what redaction may make of orig: orig
// itself, Marker, orig's name, '=' and Marker, or, for an argument with
// whitespace, its words each made so between the same separators.
func redactedAs(orig, a string) bool {
	if redactedWord(orig, a) {
		return true
	}
	ot, at := tokens(orig), tokens(a)
	if len(ot) < 2 || len(ot) != len(at) {
		return false
	}
	for i := range ot {
		if ws(ot[i]) != ws(at[i]) || ws(ot[i]) && ot[i] != at[i] || !redactedWord(ot[i], at[i]) {
			return false
		}
	}
	return true
}

// redactedWord reports whether a is orig, Marker, or orig's name, '='
// and Marker.
func redactedWord(orig, a string) bool {
	name, _, _ := strings.Cut(orig, "=")
	return a == orig || a == Marker || a == name+"="+Marker
}

// asciiSpace is what Argv splits words at.
const asciiSpace = " \t\n\v\f\r"

// ws reports whether s is a run of separators.
func ws(s string) bool { return s != "" && strings.Trim(s, asciiSpace) == "" }

// tokens splits s into runs of separators and runs of the other bytes.
func tokens(s string) []string {
	var out []string
	for s != "" {
		n := strings.IndexFunc(s, func(r rune) bool { return strings.ContainsRune(asciiSpace, r) != ws(s[:1]) })
		if n < 0 {
			n = len(s)
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// unquoted is a word with one layer of quotes removed: a leading ' or "
// and the same at its end, or else a trailing one.
func unquoted(s string) string {
	switch {
	case s == "":
	case s[0] == '\'' || s[0] == '"':
		return strings.TrimSuffix(s[1:], s[:1])
	case s[len(s)-1] == '\'' || s[len(s)-1] == '"':
		return s[:len(s)-1]
	}
	return s
}

// keptWords checks, in each argument with whitespace that no pattern
// matched whole, that a word Argv kept is one no pattern matches, quoted
// or not: GLOB, NAME=VALUE, or NEXT after the word before it as FLAG;
// and that when the first word it hid opens a quote at its start or at
// its value's (one with no quote before it, not closed in the word), the
// words up to the first that holds that quote again are hidden too.
func keptWords(t *testing.T, r *Rules, argv, got []string) {
	t.Helper()
	m := func(g glob, s string) bool { return g.match(s) || g.match(unquoted(s)) }
	for i, a := range argv {
		if got[i] == Marker || !strings.ContainsAny(a, asciiSpace) {
			continue
		}
		top := false
		for _, p := range r.pats {
			name, val, ok := strings.Cut(a, "=")
			top = top || p.form == whole && p.a.match(a) ||
				p.form == value && ok && p.a.match(name) && p.b.match(val) ||
				p.form == next && i > 0 && p.a.match(argv[i-1]) && p.b.match(a)
		}
		if top {
			continue
		}
		var ow, gw []string
		for _, w := range tokens(a) {
			if !ws(w) {
				ow = append(ow, w)
			}
		}
		for _, w := range tokens(got[i]) {
			if !ws(w) {
				gw = append(gw, w)
			}
		}
		first, span := -1, -1 // the words after first up to span must be hidden
		if Hides(a) {
			first = len(ow) // a marker hidden is itself: the first hidden word is not seen
		}
		for k, w := range ow {
			if first < 0 && gw[k] != w {
				first = k
				name, val, ok := strings.Cut(w, "=")
				if !ok || strings.ContainsAny(name, `'"`) {
					val = w
				}
				if val != "" && (val[0] == '\'' || val[0] == '"') && !strings.Contains(val[1:], val[:1]) {
					span = len(ow) - 1
					for j := k + 1; j < len(ow); j++ {
						if strings.Contains(ow[j], val[:1]) {
							span = j
							break
						}
					}
				}
			}
			if first < k && k <= span && gw[k] != Marker {
				t.Fatalf("Argv(%q)[%d] = %q: its word %q is in a quote a hidden word opened", argv, i, got[i], w)
			}
			if gw[k] != w || Marked(w) { // hidden (a marker hidden is itself)
				continue
			}
			for _, p := range r.pats {
				name, val, ok := strings.Cut(w, "=")
				if p.form == whole && m(p.a, w) ||
					p.form == value && ok && m(p.a, name) && m(p.b, val) ||
					p.form == next && k > 0 && m(p.a, ow[k-1]) && m(p.b, w) {
					t.Fatalf("Argv(%q)[%d] = %q: its word %q is kept, but %q matches it", argv, i, got[i], w, p.original)
				}
			}
		}
	}
}

// BenchmarkArgv: the cost on the event path of an argv no pattern
// matches, with no rules (what a daemon without redact_args pays) and
// with four; and, with the four, of a shell's script (an argument with
// whitespace and quotes, matched word by word).
func BenchmarkArgv(b *testing.B) {
	four, err := Parse([]string{"--password=*", "-p *", "*token*=*", "ghp_*"})
	if err != nil {
		b.Fatal(err)
	}
	argv := []string{"python3", "-m", "http.server", "--bind", "127.0.0.1", "8080", "--directory=/srv/www/site"}
	script := []string{"sh", "-c", "cd /srv/www &&\n\texec python3 -m http.server --bind 127.0.0.1 8080 --directory='/srv/www/site' \"$@\""}
	for _, c := range []struct {
		name string
		r    *Rules
		argv []string
	}{{"none", nil, argv}, {"four", four, argv}, {"script", four, script}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, changed := c.r.Argv(c.argv); changed {
					b.Fatal("redacted")
				}
			}
		})
	}
}

func TestCut(t *testing.T) {
	tests := []struct {
		a    string
		n    int
		want int
	}{
		{"--password=[REDACTED]", 15, 11},
		{"--password=[REDACTED]", 20, 11},
		{"--password=[REDACTED]", 12, 11},
		{"--password=[REDACTED]", 11, 11}, // before the mark
		{"--password=[REDACTED]", 21, 21}, // whole
		{"--password=[REDACTED]", 99, 99},
		{"--password=[REDACTED]", 3, 3},
		{"[REDACTED]", 1, 0},
		{"[REDACTED]", 0, 0},
		{"x [REDACTED] [REDACTED] y", 15, 13}, // inside the second
		{"x [REDACTED] [REDACTED] y", 12, 12}, // just after the first
		{"x [REDACTED] [REDACTED] y", 13, 13},
		{"[REDACTIVE] and more", 5, 5}, // not a mark
		{"plain text", 4, 4},
		{"", 0, 0},
	}
	for _, tt := range tests {
		if got := Cut(tt.a, tt.n); got != tt.want {
			t.Errorf("Cut(%q, %d) = %d, want %d", tt.a, tt.n, got, tt.want)
		}
	}
}
