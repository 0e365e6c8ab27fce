package jobout

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// GiveTo gives the job's user uid read and write access to the output
// file fd: a POSIX ACL entry for uid on a file that stays root's (0600,
// user rw, group and others none). Its owner alone may take a lease on a
// file (fcntl F_SETLEASE), and a job whose write lease held off the
// daemon's open ran past the bound until the kernel broke the lease (45 s
// by default) again and again. The user still reads the file, and its
// job still opens /dev/stdout anew, through the ACL entry. Where the
// filesystem keeps no ACLs (EOPNOTSUPP) the file is chowned to uid and
// gid instead, as before: a lease can then hold the bound off, and a
// daemon without CAP_DAC_OVERRIDE cannot open the file to bound it at
// all. acl reports which. Either way, the daemon takes the file back
// before it gives it up (Discard).
func GiveTo(fd int, uid, gid uint32) (acl bool, err error) {
	err = unix.Fsetxattr(fd, "system.posix_acl_access", userACL(uid), 0)
	switch {
	case err == nil:
		return true, nil
	case !errors.Is(err, unix.EOPNOTSUPP):
		return false, fmt.Errorf("setting the output's ACL: %w", err)
	}
	if err := unix.Fchown(fd, int(uid), int(gid)); err != nil {
		return false, fmt.Errorf("chown of the output: %w", err)
	}
	return false, nil
}

// userACL is the system.posix_acl_access value (version 2, entries by tag)
// of user::rw-, user:uid:rw-, group::---, mask::rw-, other::---.
func userACL(uid uint32) []byte {
	const (
		version  = 2
		userObj  = 0x01
		user     = 0x02
		groupObj = 0x04
		mask     = 0x10
		other    = 0x20
		rw       = 6
		undef    = 0xffffffff
	)
	entries := [][3]uint32{{userObj, rw, undef}, {user, rw, uid}, {groupObj, 0, undef}, {mask, rw, undef}, {other, 0, undef}}
	b := binary.LittleEndian.AppendUint32(nil, version)
	for _, e := range entries {
		b = binary.LittleEndian.AppendUint16(b, uint16(e[0]))
		b = binary.LittleEndian.AppendUint16(b, uint16(e[1]))
		b = binary.LittleEndian.AppendUint32(b, e[2])
	}
	return b
}
