package testenv

import (
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// Pty opens a new pseudo-terminal and returns its master, its terminal
// (neither becomes the test's controlling terminal) and the terminal's
// number (/dev/pts/N, minor N). Both close when the test ends.
func Pty(t testing.TB) (master, tty *os.File, n uint32) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		Skip(t, "no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err = unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.FormatUint(uint64(n), 10), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return m, s, n
}
