package container

import (
	"strings"
	"testing"
)

const (
	id1 = "3f1c5d2e9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d"
	id2 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

func TestID(t *testing.T) {
	tests := []struct {
		path string
		id   string
		rt   Runtime
	}{
		{"/docker/" + id1, id1, Docker},
		{"/system.slice/docker-" + id1 + ".scope", id1, Docker},
		{"/system.slice/docker-" + id1 + ".scope/init.scope", id1, Docker},
		{"/kubepods/burstable/pod7c2f0a61-4a3e-4f6b-9d1e-2b3c4d5e6f70/" + id1, id1, Kubernetes},
		{"/kubepods/pod7c2f0a61-4a3e-4f6b-9d1e-2b3c4d5e6f70/" + id1, id1, Kubernetes},
		{"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod7c2f0a61_4a3e_4f6b_9d1e_2b3c4d5e6f70.slice/cri-containerd-" + id1 + ".scope", id1, Containerd},
		{"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice/crio-" + id1 + ".scope", id1, CRIO},
		{"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1.slice/crio-" + id1 + ".scope/container", id1, CRIO},
		{"/machine.slice/libpod-" + id1 + ".scope", id1, Podman},
		{"/machine.slice/libpod-" + id1 + ".scope/container", id1, Podman},
		{"/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" + id1 + ".scope", id1, Podman},
		{"/libpod_parent/libpod-" + id1, id1, Podman},
		// docker in docker: the innermost container.
		{"/docker/" + id1 + "/docker/" + id2, id2, Docker},
		{"/system.slice/docker-" + id1 + ".scope/docker/" + id2, id2, Docker},
		// Not containers.
		{"/", "", ""},
		{"", "", ""},
		{"/user.slice/user-1000.slice/session-3.scope", "", ""},
		{"/system.slice/docker.service", "", ""},
		{"/system.slice/sshd.service/" + id1, "", ""}, // a bare hash outside docker and kubepods
		{"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/crio-conmon-" + id1 + ".scope", "", ""},
		{"/machine.slice/libpod-conmon-" + id1 + ".scope", "", ""},
		{"/system.slice/docker-" + id1[:63] + ".scope", "", ""},             // too short
		{"/system.slice/docker-" + strings.ToUpper(id1) + ".scope", "", ""}, // not lowercase
		{"/docker/" + id1 + "0", "", ""},                                    // too long
		{"/system.slice/docker-" + id1 + ".scopes", "", ""},
	}
	for _, tt := range tests {
		id, rt, ok := ID(tt.path)
		if id != tt.id || rt != tt.rt || ok != (tt.id != "") {
			t.Errorf("ID(%q) = %q, %q, %v, want %q, %q, %v", tt.path, id, rt, ok, tt.id, tt.rt, tt.id != "")
		}
	}
}

func TestIDDoesNotAllocate(t *testing.T) {
	p := "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/cri-containerd-" + id1 + ".scope"
	if n := testing.AllocsPerRun(100, func() { ID(p) }); n != 0 {
		t.Errorf("ID allocates %v times, want 0", n)
	}
}

// FuzzID checks that ID never panics and that an id it returns is 64
// lowercase hex digits found in the path, in a component of a known layout.
func FuzzID(f *testing.F) {
	for _, s := range []string{"/docker/" + id1, "/system.slice/docker-" + id1 + ".scope", "/kubepods/pod1/" + id1, "/machine.slice/libpod-" + id1 + ".scope/container", "/", "docker-", "/crio-conmon-" + id1} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		id, rt, ok := ID(p)
		if !ok {
			if id != "" || rt != "" {
				t.Fatalf("ID(%q) = %q, %q, false", p, id, rt)
			}
			return
		}
		if !isID(id) || !strings.Contains(p, id) || rt == "" {
			t.Fatalf("ID(%q) = %q, %q", p, id, rt)
		}
		if strings.Contains(p, "conmon-"+id) && !strings.Contains(strings.ReplaceAll(p, "conmon-"+id, ""), id) {
			t.Fatalf("ID(%q) = %q: a conmon scope", p, id)
		}
	})
}
