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
		}
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
// spaces, its words each made so and joined again.
func redactedAs(orig, a string) bool {
	one := func(orig, a string) bool {
		name, _, _ := strings.Cut(orig, "=")
		return a == orig || a == Marker || a == name+"="+Marker
	}
	if one(orig, a) {
		return true
	}
	if !strings.Contains(orig, " ") {
		return false
	}
	ow, aw := strings.Split(orig, " "), strings.Split(a, " ")
	if len(ow) != len(aw) {
		return false
	}
	for i := range ow {
		if !one(ow[i], aw[i]) {
			return false
		}
	}
	return true
}

// BenchmarkArgv: the cost on the event path of an argv no pattern
// matches, with no rules (what a daemon without redact_args pays) and
// with four.
func BenchmarkArgv(b *testing.B) {
	four, err := Parse([]string{"--password=*", "-p *", "*token*=*", "ghp_*"})
	if err != nil {
		b.Fatal(err)
	}
	argv := []string{"python3", "-m", "http.server", "--bind", "127.0.0.1", "8080", "--directory=/srv/www/site"}
	for _, c := range []struct {
		name string
		r    *Rules
	}{{"none", nil}, {"four", four}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, changed := c.r.Argv(argv); changed {
					b.Fatal("redacted")
				}
			}
		})
	}
}
