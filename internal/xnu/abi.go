package xnu

// The kernel's structs, field for field. Every field is naturally aligned,
// so the Go layout on amd64 and arm64 equals the C one; layout_test.go
// checks sizes and offsets against XNU's headers.

// uniqIdentifierInfo is struct proc_uniqidentifierinfo (56 bytes).
type uniqIdentifierInfo struct {
	UUID            [16]byte
	UniqueID        uint64
	PUniqueID       uint64
	IDVersion       int32
	OrigPPIDVersion int32
	Reserve2        uint64
	Reserve3        uint64
}

// bsdInfo is struct proc_bsdinfo (136 bytes).
type bsdInfo struct {
	Flags     uint32
	Status    uint32
	Xstatus   uint32
	Pid       uint32
	PPid      uint32
	UID       uint32
	GID       uint32
	RUID      uint32
	RGID      uint32
	SVUID     uint32
	SVGID     uint32
	Rfu1      uint32
	Comm      [16]byte // MAXCOMLEN
	Name      [32]byte // 2 * MAXCOMLEN
	NFiles    uint32
	PGID      uint32
	PJobc     uint32
	TDev      uint32
	TPGID     uint32
	Nice      int32
	StartSec  uint64
	StartUsec uint64
}

// bsdInfoWithUniqID is struct proc_bsdinfowithuniqid (192 bytes).
type bsdInfoWithUniqID struct {
	BSD  bsdInfo
	Uniq uniqIdentifierInfo
}

// AuditToken is audit_token_t: unsigned int val[8]. The kernel's token
// signal reads the pid from val[5] and the pid version from val[7].
type AuditToken [8]uint32

// Pid returns the pid the token names.
func (t AuditToken) Pid() int32 { return int32(t[5]) }

// PidVersion returns the pid version the token names.
func (t AuditToken) PidVersion() int32 { return int32(t[7]) }

// identFromUniq converts a flavor 17 reply for pid.
func identFromUniq(pid int32, u *uniqIdentifierInfo) Ident {
	return Ident{Pid: pid, UniqueID: u.UniqueID, PUniqueID: u.PUniqueID, IDVersion: u.IDVersion}
}

// identFromBSD converts a flavor 18 reply for pid. A reply for another pid
// is refused by the caller (checkReply).
func identFromBSD(pid int32, b *bsdInfoWithUniqID) Ident {
	id := identFromUniq(pid, &b.Uniq)
	id.PPid = int32(b.BSD.PPid)
	id.UID, id.RUID, id.SVUID = b.BSD.UID, b.BSD.RUID, b.BSD.SVUID
	id.HasCreds = true
	if b.BSD.StartSec > 0 && b.BSD.StartUsec < 1e6 {
		id.StartMicro = b.BSD.StartSec*1e6 + b.BSD.StartUsec
	}
	return id
}
