package redact

// glob is a compiled glob: literal bytes and the wildcards, kept as
// tokens so that escapes are resolved once.
type glob []tok

// tok is one element of a glob: a literal byte, '?' (any byte) or '*'.
type tok struct {
	kind byte // 0 literal, '?' or '*'
	c    byte
}

// compile turns the pattern text s into a glob; a trailing lone backslash
// (refused by parse) is taken literally.
func compile(s string) glob {
	g := make(glob, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && i+1 < len(s):
			i++
			g = append(g, tok{c: s[i]})
		case c == '*':
			if n := len(g); n > 0 && g[n-1].kind == '*' {
				continue // "**" is "*"
			}
			g = append(g, tok{kind: '*'})
		case c == '?':
			g = append(g, tok{kind: '?'})
		default:
			g = append(g, tok{c: c})
		}
	}
	return g
}

// match reports whether g matches all of s. It keeps one backtrack point,
// the last star: the text the star absorbs grows by one byte at each
// failure after it, and earlier stars never need revisiting, so the cost
// is at most len(g)*len(s).
func (g glob) match(s string) bool { return g.run(s, false) }

// matchPrefix reports whether g matches some string that begins with s:
// whether s, cut short, may be the start of what g matches whole.
func (g glob) matchPrefix(s string) bool { return g.run(s, true) }

// matchAs is matchPrefix when prefix is set, match otherwise.
func (g glob) matchAs(s string, prefix bool) bool { return g.run(s, prefix) }

// run is match, and with prefix set matchPrefix: once s is used up, the
// tokens left can match what s was cut from (a literal its byte, '?' any
// byte, '*' nothing).
func (g glob) run(s string, prefix bool) bool {
	gi, si := 0, 0
	star, mark := -1, 0
	for si < len(s) {
		if gi < len(g) {
			switch t := g[gi]; {
			case t.kind == '*':
				star, mark = gi, si
				gi++
				continue
			case t.kind == '?' || t.c == s[si]:
				gi++
				si++
				continue
			}
		}
		if star < 0 {
			return false
		}
		mark++
		gi, si = star+1, mark
	}
	if prefix {
		return true
	}
	for gi < len(g) && g[gi].kind == '*' {
		gi++
	}
	return gi == len(g)
}
