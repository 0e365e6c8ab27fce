package api

import (
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// socketAdvice says, after a permission error on socket, who may use it
// and how to be one of them: its owner, group and mode (and its
// directory's, when that is what keeps the caller out), and the fix.
func socketAdvice(socket string) string {
	st, err := os.Stat(socket)
	if err != nil {
		return fmt.Sprintf(" (%v)", err)
	}
	owner, group, gid := ownerOf(st)
	msg := fmt.Sprintf(" (owner %s, group %s, mode %s)", owner, group, st.Mode())
	if dir, err := os.Stat(filepath.Dir(socket)); err == nil && dir.Mode().Perm()&0o001 == 0 {
		downer, dgroup, _ := ownerOf(dir)
		msg += fmt.Sprintf("; its directory %s is owner %s, group %s, mode %s", filepath.Dir(socket), downer, dgroup, dir.Mode())
	}
	if gid == 0 {
		return msg + ": only root may use it; to let a user in, set socket_group in the daemon's config (--socket-group GROUP), restart it, and add the user to that group"
	}
	return msg + fmt.Sprintf(": members of group %s may use it (the daemon's socket_group, --socket-group); add this user to it (usermod -aG %s USER) and log in again", group, group)
}

// ownerOf names the owner and group of a file, by name when the user
// database has one, else by number.
func ownerOf(fi fs.FileInfo) (owner, group string, gid uint32) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "?", "?", 0
	}
	owner, group = strconv.FormatUint(uint64(st.Uid), 10), strconv.FormatUint(uint64(st.Gid), 10)
	if u, err := user.LookupId(owner); err == nil {
		owner = u.Username
	}
	if g, err := user.LookupGroupId(group); err == nil {
		group = g.Name
	}
	return owner, group, st.Gid
}
