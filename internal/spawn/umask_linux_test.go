package spawn

import (
	"fmt"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/testenv"
)

// TestIntegrationShimUmaskAndNice: the workload has the spec's umask, and
// its nice value where that is less favourable than the shim's own (the
// daemon's), never a more favourable one; without either it keeps the
// shim's.
func TestIntegrationShimUmaskAndNice(t *testing.T) {
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
	if err != nil {
		t.Fatal(err)
	}
	own := 20 - prio // the shim forks from a thread of this process
	if own > 10 {
		testenv.Skip(t, "the test runs at nice %d: a higher one cannot be told from it", own)
	}
	ownUmask := syscall.Umask(0)
	syscall.Umask(ownUmask)
	u := func(v uint32) *uint32 { return &v }
	n := func(v int) *int { return &v }
	tests := []struct {
		name     string
		umask    *uint32
		nice     *int
		wantMask int
		wantNice int
	}{
		{"umask 077, nice 15", u(0o077), n(15), 0o077, 15},
		{"umask 0, nice 19", u(0), n(19), 0, 19},
		{"umask 027, nice above the kernel's highest", u(0o027), n(40), 0o027, 19},
		{"umask 022, nice more favourable than the shim's", u(0o022), n(own - 5), 0o022, own},
		{"neither", nil, nil, ownUmask, own},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := Spec{Argv: []string{"sh", "-c", `umask; cut -d" " -f19 /proc/self/stat`}, Umask: tt.umask, Nice: tt.nice}
			_, out, ws, err := startSpec(t, spec, "/")
			if err != nil || ws.ExitStatus() != 0 {
				t.Fatalf("workload: %v, %v, output %q", err, ws, out)
			}
			if want := fmt.Sprintf("%04o\n%d\n", tt.wantMask, tt.wantNice); out != want {
				t.Errorf("workload with umask %v and nice %v says %q, want %q", deref(tt.umask, "%#o"), deref(tt.nice, "%d"), out, want)
			}
		})
	}
}

// deref formats what p points to with verb, or says "unset".
func deref[T any](p *T, verb string) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprintf(verb, *p)
}
