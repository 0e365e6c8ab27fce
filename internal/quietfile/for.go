package quietfile

import (
	"io"
	"os"
)

// For returns a Writer for w when w is an *os.File New has one for, and
// w itself otherwise (a buffer, a terminal off Linux, a file on NFS).
// Whoever gets a *Writer closes it when done.
func For(w io.Writer) io.Writer {
	if f, ok := w.(*os.File); ok {
		if q := New(f); q != nil {
			return q
		}
	}
	return w
}
