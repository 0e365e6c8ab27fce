//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package tracepoint

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"
)

// mmapRing consumes a BPF ring buffer map through its memory mapping,
// without a system call and without copying: a record is handed out where
// it lies in the ring, and its space is given back to the programs only
// when the next record is asked for. It never waits: a drained ring is
// os.ErrDeadlineExceeded, and the Source waits for the ring in the
// netpoller (readyWaiter) instead.
//
// cilium/ebpf's ringbuf.Reader, which it replaces when the netpoller can
// wait for the ring, copies each record into the caller's buffer and
// makes an epoll_wait system call each time the ring is found drained.
// Under an exec storm that was a system call per drain, and each one woke
// the Go runtime's sysmon thread from its deep sleep to its 20 µs tick,
// which cost more than the reading.
//
// Layout (kernel/bpf/ringbuf.c): page 0 holds the consumer position (the
// only page user space may write); from page 1 the producer position's
// page, then the data area mapped twice in a row, so that a record that
// wraps around is contiguous. Each record is an 8-byte header (length,
// with a busy bit while reserved and a discard bit, then the page offset)
// and its data, padded to 8 bytes.
type mmapRing struct {
	cons, prod []byte // the two mappings
	consPos    *uint64
	prodPos    *uint64
	data       []byte // the data area, twice
	mask       uint64
	// next is where the record after the one handed out starts: the
	// consumer position to publish before reading on.
	next    uint64
	pending bool // a record was handed out and next is not published
	closed  atomic.Bool
}

// Ring buffer record header bits (include/uapi/linux/bpf.h).
const (
	ringBusyBit    = 1 << 31
	ringDiscardBit = 1 << 30
	ringHeaderSize = 8
)

var _ recordReader = (*mmapRing)(nil)

// newMmapRing maps the ring buffer map fd whose data area is size bytes (a
// power of two, a multiple of the page size).
func newMmapRing(fd, size int) (*mmapRing, error) {
	page := os.Getpagesize()
	if size <= 0 || size&(size-1) != 0 || size%page != 0 {
		return nil, fmt.Errorf("ring buffer size %d is not a power-of-two number of pages", size)
	}
	cons, err := unix.Mmap(fd, 0, page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map ring buffer consumer page: %w", err)
	}
	prod, err := unix.Mmap(fd, int64(page), page+2*size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		unix.Munmap(cons)
		return nil, fmt.Errorf("map ring buffer data: %w", err)
	}
	return ringOver(cons, prod, page, size), nil
}

// ringOver reads the ring laid out in cons (the consumer position first)
// and prod (the producer position first, the data area twice from offset
// page); newMmapRing passes the mappings, tests plain memory.
func ringOver(cons, prod []byte, page, size int) *mmapRing {
	r := &mmapRing{
		cons: cons, prod: prod,
		consPos: (*uint64)(unsafe.Pointer(&cons[0])),
		prodPos: (*uint64)(unsafe.Pointer(&prod[0])),
		data:    prod[page : page+2*size],
		mask:    uint64(size - 1),
	}
	r.next = atomic.LoadUint64(r.consPos)
	return r
}

// ReadInto points rec.RawSample at the next record in the ring (valid until
// the next ReadInto or Close) and sets rec.Remaining to the bytes after it.
// It gives the previous record's space back first. A drained ring, or one
// whose next record is still being written, is os.ErrDeadlineExceeded;
// after Close, ringbuf.ErrClosed.
func (r *mmapRing) ReadInto(rec *ringbuf.Record) error {
	if r.closed.Load() {
		return ringbuf.ErrClosed
	}
	if r.pending {
		r.pending = false
		atomic.StoreUint64(r.consPos, r.next)
	}
	prod := atomic.LoadUint64(r.prodPos)
	for {
		cons := r.next
		if prod-cons < ringHeaderSize {
			// Empty: the producer position moves by whole records (at
			// reservation, the header busy until the commit).
			return os.ErrDeadlineExceeded
		}
		hdr := atomic.LoadUint32((*uint32)(unsafe.Pointer(&r.data[cons&r.mask])))
		if hdr&ringBusyBit != 0 {
			return os.ErrDeadlineExceeded
		}
		n := uint64(hdr &^ (ringBusyBit | ringDiscardBit))
		end := cons + ringHeaderSize + (n+7)&^7
		if n > r.mask+1 || end > prod {
			return fmt.Errorf("ring buffer record of %d bytes at %d past the producer at %d", n, cons, prod)
		}
		r.next = end
		if hdr&ringDiscardBit != 0 {
			atomic.StoreUint64(r.consPos, end)
			continue
		}
		start := (cons + ringHeaderSize) & r.mask
		rec.RawSample = r.data[start : start+n : start+n]
		rec.Remaining = int(prod - end)
		r.pending = true
		return nil
	}
}

// SetDeadline does nothing: the ring never waits (see mmapRing).
func (r *mmapRing) SetDeadline(time.Time) {}

// Close makes further reads fail. The mappings stay until unmap, which the
// Source calls once no Read runs.
func (r *mmapRing) Close() error {
	r.closed.Store(true)
	return nil
}

// unmap releases the mappings; no ReadInto may run or follow.
func (r *mmapRing) unmap() error {
	return errors.Join(unix.Munmap(r.prod), unix.Munmap(r.cons))
}
