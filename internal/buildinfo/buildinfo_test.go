package buildinfo

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"runtime"
	"testing"
)

// TestBPFObject: the hash is the one of the object file the source tree
// holds, which bpf2go embeds.
func TestBPFObject(t *testing.T) {
	i := Read("")
	if runtime.GOOS != "linux" {
		if i.BPFObject != "" {
			t.Errorf("BPFObject = %q on %s, want none", i.BPFObject, runtime.GOOS)
		}
		return
	}
	b, err := os.ReadFile("../events/tracepoint/process_bpfel.o")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if want := hex.EncodeToString(sum[:]); i.BPFObject != want {
		t.Errorf("BPFObject = %q, want %q", i.BPFObject, want)
	}
}

func TestRead(t *testing.T) {
	for _, c := range []struct{ linked, want string }{
		{"v9.9.9", "v9.9.9"},
		{"dev", ""}, // the module's own, whatever the test binary has
		{"", ""},
	} {
		i := Read(c.linked)
		if c.want != "" && i.Version != c.want {
			t.Errorf("Read(%q).Version = %q, want %q", c.linked, i.Version, c.want)
		}
		if c.want == "" && (i.Version == "dev" || i.Version == "") {
			t.Errorf("Read(%q).Version = %q, want the module's version", c.linked, i.Version)
		}
		if i.GoVersion != runtime.Version() {
			t.Errorf("Read(%q).GoVersion = %q, want %q", c.linked, i.GoVersion, runtime.Version())
		}
	}
}
