package xnu

import (
	"bytes"
	"encoding/binary"
	"testing"
	"unsafe"
)

// TestLayoutMatchesXNU checks the Go mirrors against the sizes and offsets
// of XNU's headers (bsd/sys/proc_info.h, bsd/sys/proc_info_private.h,
// osfmk/mach/message.h). The darwin code passes these structs to the
// kernel as they are; a wrong offset would read another field.
func TestLayoutMatchesXNU(t *testing.T) {
	var u uniqIdentifierInfo
	var b bsdInfo
	var w bsdInfoWithUniqID
	var a AuditToken
	tests := []struct {
		name      string
		got, want uintptr
	}{
		{"sizeof(struct proc_uniqidentifierinfo)", unsafe.Sizeof(u), 56},
		{"p_uuid", unsafe.Offsetof(u.UUID), 0},
		{"p_uniqueid", unsafe.Offsetof(u.UniqueID), 16},
		{"p_puniqueid", unsafe.Offsetof(u.PUniqueID), 24},
		{"p_idversion", unsafe.Offsetof(u.IDVersion), 32},
		{"p_orig_ppidversion", unsafe.Offsetof(u.OrigPPIDVersion), 36},
		{"p_reserve2", unsafe.Offsetof(u.Reserve2), 40},
		{"p_reserve3", unsafe.Offsetof(u.Reserve3), 48},
		{"sizeof(struct proc_bsdinfo)", unsafe.Sizeof(b), 136},
		{"pbi_pid", unsafe.Offsetof(b.Pid), 12},
		{"pbi_ppid", unsafe.Offsetof(b.PPid), 16},
		{"pbi_uid", unsafe.Offsetof(b.UID), 20},
		{"pbi_ruid", unsafe.Offsetof(b.RUID), 28},
		{"pbi_svuid", unsafe.Offsetof(b.SVUID), 36},
		{"pbi_comm", unsafe.Offsetof(b.Comm), 48},
		{"pbi_name", unsafe.Offsetof(b.Name), 64},
		{"pbi_nfiles", unsafe.Offsetof(b.NFiles), 96},
		{"pbi_nice", unsafe.Offsetof(b.Nice), 116},
		{"pbi_start_tvsec", unsafe.Offsetof(b.StartSec), 120},
		{"pbi_start_tvusec", unsafe.Offsetof(b.StartUsec), 128},
		{"sizeof(struct proc_bsdinfowithuniqid)", unsafe.Sizeof(w), 192},
		{"p_uniqidentifier", unsafe.Offsetof(w.Uniq), 136},
		{"sizeof(audit_token_t)", unsafe.Sizeof(a), 32},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %d, want %d", tt.name, tt.got, tt.want)
		}
	}
	a[5], a[7] = 4242, 77
	raw := (*[32]byte)(unsafe.Pointer(&a))
	if binary.NativeEndian.Uint32(raw[20:]) != 4242 || binary.NativeEndian.Uint32(raw[28:]) != 77 {
		t.Errorf("audit token bytes %x: pid must be at 20 (val[5]) and the pid version at 28 (val[7])", raw)
	}
}

// replyBytes lays out a flavor 18 reply as the kernel writes it.
func replyBytes(pid, ppid, uid uint32, sec, usec, uniq, puniq uint64, ver int32) []byte {
	var buf bytes.Buffer
	w := func(v any) { _ = binary.Write(&buf, binary.LittleEndian, v) }
	w([5]uint32{0, 0, 0, pid, ppid})
	w([7]uint32{uid, 20, uid, 20, uid, 20, 0})
	w([48]byte{'n', 'o', 'd', 'e'})
	w([6]uint32{})
	w([2]uint64{sec, usec})
	w([16]byte{})
	w([2]uint64{uniq, puniq})
	w([2]int32{ver, 0})
	w([2]uint64{})
	return buf.Bytes()
}

// decodeReply reads a flavor 18 reply from its bytes into the mirror, as
// the kernel's copyout fills it.
func decodeReply(b []byte) (bsdInfoWithUniqID, bool) {
	var r bsdInfoWithUniqID
	if len(b) != int(unsafe.Sizeof(r)) {
		return r, false
	}
	return r, binary.Read(bytes.NewReader(b), binary.LittleEndian, &r) == nil
}

func TestIdentFromReply(t *testing.T) {
	r, ok := decodeReply(replyBytes(4242, 1, 501, 1764432384, 123456, 90210, 90001, 31337))
	if !ok {
		t.Fatal("decodeReply failed")
	}
	id := identFromBSD(4242, &r)
	want := Ident{Pid: 4242, UniqueID: 90210, PUniqueID: 90001, IDVersion: 31337, StartMicro: 1764432384123456,
		PPid: 1, UID: 501, RUID: 501, SVUID: 501, HasCreds: true}
	if id != want {
		t.Errorf("identFromBSD = %+v, want %+v", id, want)
	}
	if tok := id.AuditToken(); tok.Pid() != 4242 || tok.PidVersion() != 31337 {
		t.Errorf("AuditToken = %v, want pid 4242 version 31337", tok)
	}
}

func FuzzIdentFromReply(f *testing.F) {
	f.Add(replyBytes(4242, 1, 501, 1764432384, 123456, 90210, 90001, 31337))
	f.Add(make([]byte, 192))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, ok := decodeReply(b)
		if !ok {
			return
		}
		id := identFromBSD(int32(r.BSD.Pid), &r)
		if id.StartMicro != 0 && (r.BSD.StartSec == 0 || r.BSD.StartUsec >= 1e6) {
			t.Fatalf("start %d from sec %d usec %d", id.StartMicro, r.BSD.StartSec, r.BSD.StartUsec)
		}
		if id.UniqueID != r.Uniq.UniqueID || id.AuditToken().PidVersion() != r.Uniq.IDVersion {
			t.Fatalf("ids lost: %+v from %+v", id, r.Uniq)
		}
	})
}
