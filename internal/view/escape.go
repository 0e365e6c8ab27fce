package view

import "io"

// ControlWriter writes bytes to a terminal with the control characters
// shown, not acted on: each C0 control byte but '\n' and '\t', and DEL, as
// \xNN (ESC as \x1b), and each C1 control in UTF-8 (U+0080 to U+009F, two
// bytes, 0xC2 then 0x80 to 0x9F: U+009B is CSI, U+009D OSC) as its two
// bytes, \xc2\x9b. Everything else passes as it is, bytes that are not
// UTF-8 too. It is for a workload's raw output on root's terminal, where
// an OSC 52 sequence writes the clipboard and others set colours, titles
// or the cursor. A C1 control cut between two writes is still seen: the
// 0xC2 that ends a write is held for the next (Flush writes it). Limits:
// a lone byte of 0x80 to 0x9F, not UTF-8, passes; a terminal in an 8-bit
// mode rather than UTF-8 would take it for a C1 control. "\x" that the
// output itself holds looks like an escape.
type ControlWriter struct {
	w    io.Writer
	buf  []byte
	held bool // a 0xC2 ended the last write
}

// NewControlWriter returns a ControlWriter to w.
func NewControlWriter(w io.Writer) *ControlWriter { return &ControlWriter{w: w} }

// Write writes p with its control characters escaped, in one write to the
// underlying writer, and returns len(p) or the underlying writer's error.
func (c *ControlWriter) Write(p []byte) (int, error) {
	b := c.buf[:0]
	start := 0
	if c.held && len(p) > 0 {
		c.held = false
		if p[0] >= 0x80 && p[0] < 0xa0 {
			b = appendHexByte(appendHexByte(b, 0xc2), p[0])
			start = 1
		} else {
			b = append(b, 0xc2)
		}
	}
	for i := start; i < len(p); i++ {
		switch ch := p[i]; {
		case ch < 0x20 && ch != '\n' && ch != '\t' || ch == 0x7f:
			b = appendHexByte(append(b, p[start:i]...), ch)
			start = i + 1
		case ch == 0xc2 && i+1 == len(p):
			b = append(b, p[start:i]...)
			c.held, start = true, len(p)
		case ch == 0xc2 && p[i+1] >= 0x80 && p[i+1] < 0xa0:
			b = appendHexByte(appendHexByte(append(b, p[start:i]...), ch), p[i+1])
			i++
			start = i + 1
		}
	}
	b = append(b, p[start:]...)
	c.buf = b[:0]
	if len(b) > 0 {
		if _, err := c.w.Write(b); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Flush writes a 0xC2 the last write ended with, which no C1 control
// followed.
func (c *ControlWriter) Flush() error {
	if !c.held {
		return nil
	}
	c.held = false
	_, err := c.w.Write([]byte{0xc2})
	return err
}

func appendHexByte(b []byte, ch byte) []byte {
	return append(b, '\\', 'x', hexDigits[ch>>4], hexDigits[ch&15])
}
