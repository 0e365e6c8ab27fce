package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// This file walks a bbolt file (format version 2) with bounds checks on
// every id, offset and length, before bbolt itself is let near it. bbolt
// maps the file and follows page ids and element offsets without checking
// them, so a truncated or damaged file can make it read past the mapping
// (SIGBUS or SIGSEGV: the process dies, recover cannot help) or panic in a
// goroutine of its own. The walk reads the file with ReadAt and accepts
// only what bbolt can read safely: a valid meta page chosen as bbolt would
// choose it, a high-water mark inside the file, a freelist of in-range
// ids, and a tree of branch and leaf pages, each referenced once, whose
// elements lie inside their page. Key order is checked within a page.
// Leaked pages (neither reachable nor free) are tolerated: they waste
// space but mislead no reader.

const (
	boltMagic       = 0xED0CDAED
	boltVersion     = 2
	pageHeaderSize  = 16
	elemSize        = 16 // branch and leaf page elements alike
	metaSize        = 64
	metaSumOffset   = 56
	bucketHeaderLen = 16
	noFreelist      = ^uint64(0)

	branchFlag   = 0x01
	leafFlag     = 0x02
	metaFlag     = 0x04
	freelistFlag = 0x10
	bucketLeaf   = 0x01

	maxDepth = 64
)

var errFormat = errors.New("bad bbolt file")

// boltMeta is the part of a bbolt meta page the walk needs.
type boltMeta struct {
	pageSize uint32
	root     uint64
	freelist uint64
	pgid     uint64
	txid     uint64
}

var ne = binary.NativeEndian // bbolt writes its structs in native order

// parseMeta decodes and validates the meta page that starts at b[0].
func parseMeta(b []byte) (boltMeta, error) {
	if len(b) < pageHeaderSize+metaSize {
		return boltMeta{}, fmt.Errorf("meta page of %d bytes: %w", len(b), errFormat)
	}
	m := b[pageHeaderSize : pageHeaderSize+metaSize]
	if ne.Uint32(m[0:]) != boltMagic {
		return boltMeta{}, fmt.Errorf("no bbolt magic: %w", errFormat)
	}
	if v := ne.Uint32(m[4:]); v != boltVersion {
		return boltMeta{}, fmt.Errorf("bbolt format version %d: %w", v, errFormat)
	}
	h := fnv.New64a()
	h.Write(m[:metaSumOffset])
	if h.Sum64() != ne.Uint64(m[metaSumOffset:]) {
		return boltMeta{}, fmt.Errorf("meta checksum mismatch: %w", errFormat)
	}
	return boltMeta{
		pageSize: ne.Uint32(m[8:]),
		root:     ne.Uint64(m[16:]),
		freelist: ne.Uint64(m[32:]),
		pgid:     ne.Uint64(m[40:]),
		txid:     ne.Uint64(m[48:]),
	}, nil
}

// readAtMost reads up to n bytes at off; a short read at the end of the
// file is not an error.
func readAtMost(r io.ReaderAt, off int64, n int) ([]byte, error) {
	b := make([]byte, n)
	k, err := r.ReadAt(b, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b[:k], nil
}

// verifyFile checks that the bbolt file f of the given size is safe for
// bbolt to open. Errors wrap errFormat, or are I/O errors.
func verifyFile(f io.ReaderAt, size int64) error {
	if size < 2*1024 {
		return fmt.Errorf("file of %d bytes: %w", size, errFormat)
	}
	// The page size, found as bbolt finds it: from meta 0, or else from a
	// valid meta page at 1 KiB << i.
	var pageSize uint32
	head, err := readAtMost(f, 0, 0x1000)
	if err != nil {
		return err
	}
	if m, err := parseMeta(head); err == nil && len(head) == 0x1000 {
		pageSize = m.pageSize
	} else {
		for i := range 15 {
			pos := int64(1024) << i
			if pos >= size-1024 {
				break
			}
			b, err := readAtMost(f, pos, 0x1000)
			if err != nil {
				return err
			}
			if m, err := parseMeta(b); err == nil {
				pageSize = m.pageSize
				break
			}
		}
	}
	if pageSize == 0 {
		return fmt.Errorf("no valid meta page: %w", errFormat)
	}
	if pageSize < 1024 || pageSize > 1<<24 || pageSize&(pageSize-1) != 0 {
		return fmt.Errorf("page size %d: %w", pageSize, errFormat)
	}
	ps := int64(pageSize)
	if size < 2*ps {
		return fmt.Errorf("file of %d bytes holds no two %d-byte meta pages: %w", size, ps, errFormat)
	}
	// The meta bbolt will use: the valid one with the higher txid.
	var metas [2]boltMeta
	var errs [2]error
	for i := range 2 {
		b, err := readAtMost(f, int64(i)*ps, pageHeaderSize+metaSize)
		if err != nil {
			return err
		}
		metas[i], errs[i] = parseMeta(b)
	}
	a, b := 0, 1
	if metas[1].txid > metas[0].txid {
		a, b = 1, 0
	}
	var m boltMeta
	switch {
	case errs[a] == nil:
		m = metas[a]
	case errs[b] == nil:
		m = metas[b]
	default:
		return fmt.Errorf("meta pages: %v; %w", errs[0], errs[1])
	}
	if m.pgid < 3 || m.pgid > uint64(size/ps) {
		return fmt.Errorf("high-water mark of %d pages in a file of %d pages: %w", m.pgid, size/ps, errFormat)
	}
	w := walker{r: f, ps: ps, hwm: m.pgid, seen: make([]bool, m.pgid), free: make([]bool, m.pgid)}
	w.seen[0], w.seen[1] = true, true
	if m.freelist != noFreelist {
		if err := w.freelist(m.freelist); err != nil {
			return err
		}
	}
	if m.root < 2 {
		return fmt.Errorf("root bucket at page %d: %w", m.root, errFormat)
	}
	return w.page(m.root, 0)
}

type walker struct {
	r    io.ReaderAt
	ps   int64
	hwm  uint64
	seen []bool
	free []bool
}

// read returns page id with its overflow pages, after checking its header
// and marking its span as referenced.
func (w *walker) read(id uint64) ([]byte, error) {
	if id < 2 || id >= w.hwm {
		return nil, fmt.Errorf("page %d outside [2, %d): %w", id, w.hwm, errFormat)
	}
	hdr := make([]byte, pageHeaderSize)
	if _, err := w.r.ReadAt(hdr, int64(id)*w.ps); err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	if got := ne.Uint64(hdr[0:]); got != id {
		return nil, fmt.Errorf("page %d says it is page %d: %w", id, got, errFormat)
	}
	span := uint64(ne.Uint32(hdr[12:])) + 1
	if span > w.hwm-id {
		return nil, fmt.Errorf("page %d: %d overflow pages run past the high-water mark %d: %w", id, span-1, w.hwm, errFormat)
	}
	for p := id; p < id+span; p++ {
		if w.seen[p] {
			return nil, fmt.Errorf("page %d referenced twice: %w", p, errFormat)
		}
		w.seen[p] = true
	}
	buf := make([]byte, int64(span)*w.ps)
	if _, err := w.r.ReadAt(buf, int64(id)*w.ps); err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	return buf, nil
}

func (w *walker) freelist(id uint64) error {
	p, err := w.read(id)
	if err != nil {
		return fmt.Errorf("freelist: %w", err)
	}
	if fl := ne.Uint16(p[8:]); fl != freelistFlag {
		return fmt.Errorf("freelist page %d has flags %#x: %w", id, fl, errFormat)
	}
	idx, count := uint64(0), uint64(ne.Uint16(p[10:]))
	if count == 0xFFFF {
		if len(p) < pageHeaderSize+8 {
			return fmt.Errorf("freelist page %d too short: %w", id, errFormat)
		}
		idx, count = 1, ne.Uint64(p[pageHeaderSize:])
	}
	room := uint64(len(p)-pageHeaderSize) / 8
	if idx+count > room {
		return fmt.Errorf("freelist page %d: %d ids do not fit: %w", id, count, errFormat)
	}
	for i := idx; i < idx+count; i++ {
		f := ne.Uint64(p[pageHeaderSize+8*i:])
		if f < 2 || f >= w.hwm {
			return fmt.Errorf("freelist holds page %d outside [2, %d): %w", f, w.hwm, errFormat)
		}
		if w.free[f] {
			return fmt.Errorf("freelist holds page %d twice: %w", f, errFormat)
		}
		w.free[f] = true
	}
	for q := id; q < id+uint64(len(p))/uint64(w.ps); q++ {
		if w.free[q] {
			return fmt.Errorf("freelist page %d is itself free: %w", q, errFormat)
		}
	}
	return nil
}

// page walks the tree rooted at page id.
func (w *walker) page(id uint64, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("tree deeper than %d at page %d: %w", maxDepth, id, errFormat)
	}
	p, err := w.read(id)
	if err != nil {
		return err
	}
	for q := id; q < id+uint64(len(p))/uint64(w.ps); q++ {
		if w.free[q] {
			return fmt.Errorf("page %d is both reachable and free: %w", q, errFormat)
		}
	}
	return w.elements(p, id, depth)
}

// elements checks the elements of a branch or leaf page held in p (a
// mapped page or an inline bucket's page) and walks what they reference.
func (w *walker) elements(p []byte, id uint64, depth int) error {
	flags, count := ne.Uint16(p[8:]), int(ne.Uint16(p[10:]))
	if flags != branchFlag && flags != leafFlag {
		return fmt.Errorf("page %d has flags %#x, want branch or leaf: %w", id, flags, errFormat)
	}
	if flags == branchFlag && count == 0 {
		return fmt.Errorf("branch page %d is empty: %w", id, errFormat)
	}
	if pageHeaderSize+count*elemSize > len(p) {
		return fmt.Errorf("page %d: %d elements do not fit: %w", id, count, errFormat)
	}
	var prev []byte
	for i := range count {
		e := p[pageHeaderSize+i*elemSize:]
		var pos, ksize, vsize uint64
		if flags == branchFlag {
			pos, ksize = uint64(ne.Uint32(e[0:])), uint64(ne.Uint32(e[4:]))
		} else {
			pos, ksize, vsize = uint64(ne.Uint32(e[4:])), uint64(ne.Uint32(e[8:])), uint64(ne.Uint32(e[12:]))
		}
		start := uint64(pageHeaderSize+i*elemSize) + pos
		end := start + ksize + vsize
		if end > uint64(len(p)) {
			return fmt.Errorf("page %d element %d runs past its page: %w", id, i, errFormat)
		}
		key := p[start : start+ksize]
		if i > 0 && string(key) <= string(prev) {
			return fmt.Errorf("page %d element %d: keys out of order: %w", id, i, errFormat)
		}
		prev = key
		if flags == branchFlag {
			if err := w.page(ne.Uint64(e[8:]), depth+1); err != nil {
				return err
			}
			continue
		}
		switch ef := ne.Uint32(e[0:]); ef {
		case 0:
		case bucketLeaf:
			if err := w.bucket(p[start+ksize:end], depth+1); err != nil {
				return fmt.Errorf("bucket %q: %w", key, err)
			}
		default:
			return fmt.Errorf("page %d element %d has flags %#x: %w", id, i, ef, errFormat)
		}
	}
	return nil
}

// bucket walks a bucket from its value: a header (root page, sequence) and,
// when the root is 0, an inline leaf page.
func (w *walker) bucket(v []byte, depth int) error {
	if len(v) < bucketHeaderLen {
		return fmt.Errorf("bucket header of %d bytes: %w", len(v), errFormat)
	}
	if root := ne.Uint64(v); root != 0 {
		return w.page(root, depth)
	}
	inline := v[bucketHeaderLen:]
	if len(inline) < pageHeaderSize {
		return fmt.Errorf("inline bucket of %d bytes: %w", len(inline), errFormat)
	}
	if fl := ne.Uint16(inline[8:]); fl != leafFlag {
		return fmt.Errorf("inline bucket page has flags %#x: %w", fl, errFormat)
	}
	if depth > maxDepth {
		return fmt.Errorf("buckets nested deeper than %d: %w", maxDepth, errFormat)
	}
	return w.elements(inline, 0, depth)
}

// verifyPath opens path read-only and verifies it.
func verifyPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("not a regular file (%s): %w", st.Mode().Type(), errFormat)
	}
	return verifyFile(f, st.Size())
}
