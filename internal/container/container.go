// Package container derives a container id from a cgroup v2 path, as the
// container runtimes lay their cgroups out:
//
//	docker (cgroupfs driver)      /docker/<id>
//	docker (systemd driver)       /system.slice/docker-<id>.scope
//	containerd CRI (cgroupfs)     /kubepods/burstable/pod<uid>/<id>
//	containerd CRI (systemd)      /kubepods.slice/.../cri-containerd-<id>.scope
//	CRI-O (systemd)               /kubepods.slice/.../crio-<id>.scope
//	podman (systemd, rootful)     /machine.slice/libpod-<id>.scope[/container]
//	podman (rootless)             /user.slice/.../user.slice/libpod-<id>.scope
//	podman (cgroupfs)             /libpod_parent/libpod-<id>
//
// An id is 64 lowercase hex digits. The path is read from its leaf up and the
// first component that names a container wins, so a container nested in
// another (docker in docker) reports the innermost one, and the sub-cgroups a
// runtime or the container's own init creates below its scope are still its.
// The monitors the runtimes run beside a container (crio-conmon-<id>,
// libpod-conmon-<id>) are not in it and get no id. A bare 64-hex component is
// taken only under a /docker or /kubepods ancestor, so an unrelated cgroup
// that happens to be named like a hash is not called a container.
//
// Limits: the path alone is the evidence. A process that can create cgroups
// (root, or a user with a delegated subtree) can name one like a container
// scope; the id then says where the process runs, not that a runtime
// started it. Only the cgroup v2 path is read: on a host in cgroup v1
// (legacy) mode, or a hybrid one whose runtime places its containers in the
// v1 hierarchies only, they sit at the v2 root, with no id.
package container

import "strings"

// Runtime names the layout an id was found in: the value of ECS
// container.runtime.
type Runtime string

// Runtimes.
const (
	Docker     Runtime = "docker"
	Containerd Runtime = "containerd"
	CRIO       Runtime = "cri-o"
	Podman     Runtime = "podman"
	// Kubernetes is a bare id under /kubepods: a CRI runtime that does not
	// say which (containerd or CRI-O with the cgroupfs driver).
	Kubernetes Runtime = "cri"
)

// IDLen is the length of a container id.
const IDLen = 64

// scopes are the "<prefix><id>[.scope]" component prefixes of each runtime.
var scopes = []struct {
	prefix  string
	runtime Runtime
}{
	{"docker-", Docker},
	{"cri-containerd-", Containerd},
	{"crio-", CRIO},
	{"libpod-", Podman},
}

// ID returns the container id in cgroup path p (as in /proc/PID/cgroup's
// "0::" line or the eBPF source's Event.Exec.Cgroup) and the runtime whose
// layout it matched, or ok false when p names no container. id is a
// substring of p: ID does not allocate.
func ID(p string) (id string, rt Runtime, ok bool) {
	for rest := p; rest != ""; {
		var comp string
		comp, rest = last(rest)
		if id, rt, ok := scopeID(comp); ok {
			return id, rt, true
		}
		if isID(comp) {
			if rt, ok := bareRuntime(rest); ok {
				return comp, rt, true
			}
		}
	}
	return "", "", false
}

// scopeID matches one "<prefix><id>" or "<prefix><id>.scope" component.
func scopeID(comp string) (string, Runtime, bool) {
	for _, s := range scopes {
		if !strings.HasPrefix(comp, s.prefix) {
			continue
		}
		id := strings.TrimSuffix(comp[len(s.prefix):], ".scope")
		if isID(id) {
			return id, s.runtime, true
		}
	}
	return "", "", false
}

// bareRuntime says which layout a bare id below the path parent belongs to.
func bareRuntime(parent string) (Runtime, bool) {
	for parent != "" {
		var comp string
		comp, parent = last(parent)
		switch {
		case comp == "docker":
			return Docker, true
		case comp == "kubepods" || strings.HasPrefix(comp, "kubepods."):
			return Kubernetes, true
		}
	}
	return "", false
}

// last splits p into its last component and what precedes it.
func last(p string) (comp, rest string) {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:], p[:i]
	}
	return p, ""
}

// isID reports whether s is 64 lowercase hex digits.
func isID(s string) bool {
	if len(s) != IDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
