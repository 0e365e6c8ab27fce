package view

import (
	"io"
	"unicode/utf8"

	"github.com/procsupervisor/supervisor/internal/jsonx"
)

// ControlWriter writes bytes to a terminal with the control characters
// shown, not acted on. Each C0 control byte but '\n' and '\t', and DEL,
// is written as \xNN (ESC as \x1b); each character of two bytes or more
// that the JSON encoders escape (jsonx.Escaped: the C1 controls U+0080 to
// U+009F, U+009B being CSI and U+009D OSC, the line and paragraph
// separators, the bidirectional controls such as U+202E) as its bytes,
// \xc2\x9b; and each byte that is not part of a UTF-8 character as \xNN,
// so that a lone 0x9B, which a terminal in an 8-bit mode takes for CSI,
// does not reach it either. Everything else passes as it is. It is for a
// workload's raw output on root's terminal, where an OSC 52 sequence
// writes the clipboard and others set colours, titles or the cursor, and
// U+202E shows the rest of a line reversed. A character cut between two
// writes is still seen whole: the first bytes of a character that end a
// write (up to three) are held for the next, and Flush writes them,
// escaped, when no more came. Limits: text that is not UTF-8 (Latin-1) is
// shown as \xNN bytes; "\x" that the output itself holds looks like an
// escape.
type ControlWriter struct {
	w    io.Writer
	buf  []byte // the escaped bytes of one write
	in   []byte // the held bytes and the next write's, when some were held
	held []byte // the first bytes of a character that ended the last write
}

// NewControlWriter returns a ControlWriter to w.
func NewControlWriter(w io.Writer) *ControlWriter { return &ControlWriter{w: w} }

// Write writes p with its control characters escaped, in one write to the
// underlying writer, and returns len(p) or the underlying writer's error.
func (c *ControlWriter) Write(p []byte) (int, error) {
	in := p
	if len(c.held) > 0 {
		c.in = append(append(c.in[:0], c.held...), p...)
		c.held = c.held[:0]
		in = c.in
	}
	b := c.buf[:0]
	start := 0
	for i := 0; i < len(in); {
		ch := in[i]
		if ch < utf8.RuneSelf {
			if ch < 0x20 && ch != '\n' && ch != '\t' || ch == 0x7f {
				b = appendHexByte(append(b, in[start:i]...), ch)
				start = i + 1
			}
			i++
			continue
		}
		if !utf8.FullRune(in[i:]) {
			// The first bytes of a character the next write ends.
			b = append(b, in[start:i]...)
			c.held = append(c.held[:0], in[i:]...)
			start = len(in)
			break
		}
		r, size := utf8.DecodeRune(in[i:])
		if r == utf8.RuneError && size == 1 || jsonx.Escaped(r) {
			b = append(b, in[start:i]...)
			for _, x := range in[i : i+size] {
				b = appendHexByte(b, x)
			}
			start = i + size
		}
		i += size
	}
	b = append(b, in[start:]...)
	c.buf = b[:0]
	if len(b) > 0 {
		if _, err := c.w.Write(b); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Flush writes, as \xNN, the first bytes of a character that the last
// write ended with and no more came to complete.
func (c *ControlWriter) Flush() error {
	if len(c.held) == 0 {
		return nil
	}
	b := c.buf[:0]
	for _, x := range c.held {
		b = appendHexByte(b, x)
	}
	c.held, c.buf = c.held[:0], b[:0]
	_, err := c.w.Write(b)
	return err
}

func appendHexByte(b []byte, ch byte) []byte {
	return append(b, '\\', 'x', hexDigits[ch>>4], hexDigits[ch&15])
}
