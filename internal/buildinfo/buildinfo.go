// Package buildinfo says what a supervisor binary is: its module version,
// the commit it was built from, that commit's date, the Go toolchain and
// the SHA-256 of the eBPF object it embeds. All but the last come from the
// build information the Go linker records (runtime/debug.ReadBuildInfo):
// `go build` in a git checkout stamps vcs.revision, vcs.time and
// vcs.modified; a build outside one (or with -buildvcs=false) has none, and
// the fields are then empty. Go records no build time (builds are
// reproducible), so the date is the commit's.
package buildinfo

import (
	"runtime/debug"
	"strconv"
)

// Info is what a binary says about itself.
type Info struct {
	// Version is the main module's version ("v1.2.3", a pseudo-version, or
	// "(devel)"), unless the linker set one (-X main.version=...).
	Version string `json:"version"`
	// Commit is the VCS revision; Modified says the tree had changes.
	Commit   string `json:"commit,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	// Date is the commit's time (RFC 3339), the nearest to a build date.
	Date      string `json:"date,omitempty"`
	GoVersion string `json:"go_version"`
	// BPFObject is the SHA-256 (hex) of the embedded eBPF object, "" on a
	// platform that embeds none.
	BPFObject string `json:"bpf_object_sha256,omitempty"`
}

// Read returns this binary's Info. linked is the version set at link time
// ("" or "dev" when none was).
func Read(linked string) Info {
	i := Info{Version: linked, BPFObject: bpfObject()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return i
	}
	i.GoVersion = bi.GoVersion
	if linked == "" || linked == "dev" {
		i.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			i.Commit = s.Value
		case "vcs.time":
			i.Date = s.Value
		case "vcs.modified":
			i.Modified, _ = strconv.ParseBool(s.Value)
		}
	}
	return i
}
