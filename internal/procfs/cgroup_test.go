package procfs

import (
	"bytes"
	"slices"
	"testing"
)

func TestCgroup2Mount(t *testing.T) {
	tests := []struct {
		name, in, want string
		ok             bool
	}{
		{"hybrid", "30 22 0:27 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n", "/sys/fs/cgroup/unified", true},
		{"unified", "25 1 0:22 / /sys/fs/cgroup rw shared:4 - cgroup2 cgroup2 rw,nsdelegate\n", "/sys/fs/cgroup", true},
		{"escaped", `25 1 0:22 / /mnt/cg\040two rw - cgroup2 none rw` + "\n", "/mnt/cg two", true},
		{"v1 only", "31 30 0:28 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n", "", false},
		{"garbage", "cgroup2 - cgroup2\n", "", false},
	}
	for _, tt := range tests {
		got, ok := Cgroup2Mount([]byte(tt.in))
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: Cgroup2Mount = %q, %v, want %q, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
	if p, ok := Cgroup2Path([]byte("4:memory:/x\n0::/system.slice/s.service\n")); !ok || p != "/system.slice/s.service" {
		t.Errorf("Cgroup2Path = %q, %v", p, ok)
	}
}

func FuzzCgroup2Mount(f *testing.F) {
	f.Add([]byte("40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"))
	f.Add([]byte(`25 1 0:22 / /mnt/cg\040two rw - cgroup2 none rw`))
	f.Add([]byte(" - cgroup2"))
	f.Add([]byte("0::/system.slice/x.service\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		// What is found comes from the input: a mount point (unescaped,
		// so not compared) of type cgroup2, a "0::" line.
		if p, ok := Cgroup2Mount(b); ok && (p == "" || !bytes.Contains(b, []byte("cgroup2"))) {
			t.Fatalf("Cgroup2Mount = %q, true from input without a cgroup2 mount", p)
		} else if !ok && p != "" {
			t.Fatalf("Cgroup2Mount = %q, false", p)
		}
		if p, ok := Cgroup2Path(b); ok && !bytes.Contains(b, []byte("0::"+p)) {
			t.Fatalf("Cgroup2Path = %q, true, not a line of the input", p)
		} else if !ok && p != "" {
			t.Fatalf("Cgroup2Path = %q, false", p)
		}
	})
}

// TestMounts: mount points unescaped, type and super options read, lines
// without a separator or a mount point skipped, missing fields empty.
func TestMounts(t *testing.T) {
	mi := []byte(`22 1 0:21 / /proc rw,nosuid shared:12 - proc proc rw,hidepid=2
23 1 0:22 / /mnt/a\040b rw - ext4 /dev/sda1 rw,relatime
24 1 0:23 / /broken rw no separator here
25 1 0:24 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw,nsdelegate
26 1 0:25
` + "27 1 0:26 / /short rw - \n")
	var got []Mount
	for m := range Mounts(mi) {
		got = append(got, m)
	}
	want := []Mount{
		{"/proc", "proc", "rw,hidepid=2"},
		{"/mnt/a b", "ext4", "rw,relatime"},
		{"/sys/fs/cgroup/unified", "cgroup2", "rw,nsdelegate"},
		{"/short", "", ""},
	}
	if !slices.Equal(got, want) {
		t.Errorf("Mounts = %+v, want %+v", got, want)
	}
}
