package procfs

import (
	"bytes"
	"io"
	"os"
	"strconv"
	"strings"
)

// MaxCmdline bounds how much of a command line ReadCmdline reads: enough
// for a person to recognise a program, little enough for a tree of
// thousands.
const MaxCmdline = 4096

// ReadCmdline reads root/PID/cmdline, at most MaxCmdline bytes, as argv,
// and reports whether there was more (cut: the last argument may be the
// start of a longer one, which a redaction pattern must be able to tell).
// A kernel thread or a zombie has an empty one. The read names a pid, not
// an instance (see the package comment).
func ReadCmdline(root string, pid int32) (argv []string, cut bool, err error) {
	f, err := os.Open(root + "/" + strconv.Itoa(int(pid)) + "/cmdline")
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxCmdline+1))
	if err != nil {
		return nil, false, err
	}
	if cut = len(b) > MaxCmdline; cut {
		b = b[:MaxCmdline]
	}
	return ParseCmdline(b), cut, nil
}

// ParseCmdline splits the content of /proc/PID/cmdline into arguments: each
// is ended by a NUL. A process that rewrote its own title (setproctitle)
// may leave one string without NULs, or padding NULs at the end; trailing
// NULs are dropped, so a trailing empty argument is too.
func ParseCmdline(b []byte) []string {
	b = bytes.TrimRight(b, "\x00")
	if len(b) == 0 {
		return nil
	}
	return strings.Split(string(b), "\x00")
}
