//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64)

package tracepoint

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/events"
	"github.com/procsupervisor/supervisor/internal/procfs"
)

// recordReader is the consumer side of the ring buffer, as Source uses it.
// *mmapRing implements it (never waiting: Source waits in the netpoller),
// *ringbuf.Reader when the netpoller cannot wait for the ring; tests replay
// records through a fake. The record filled in may alias the reader's
// memory: it is valid until the next ReadInto.
type recordReader interface {
	// ReadInto blocks until the next record and fills rec, reusing its
	// buffer, and sets rec.Remaining (0 when the buffer is drained). After
	// Close it returns an error wrapping ringbuf.ErrClosed or os.ErrClosed.
	ReadInto(rec *ringbuf.Record) error
	// SetDeadline bounds how long ReadInto waits for a record; after it,
	// ReadInto returns the records already in the ring and then
	// os.ErrDeadlineExceeded. The zero time waits without bound.
	SetDeadline(t time.Time)
	Close() error
}

// straggleWait is how long Read keeps polling after the last record it saw.
// The eBPF programs submit records without waking the reader (see
// wake_reader in bpf/process.bpf.c) unless the reader said it sleeps
// without a deadline, or the ring is half full: a record submitted
// silently is found by this poll. Only after a quiet stretch of
// straggleWait does Read say it sleeps (Source.asleep) and sleep until a
// program wakes it.
//
// Each poll wakes the daemon, which costs the Go runtime more than the
// records it reads: under a storm of short execs the daemon on its
// defaults spent 2.5-3 µs of CPU per exec polling every 10 ms, 1.5-1.9 µs
// at 50 ms, on a host where 100 ms was no better; on a host where a
// wake-up costs far more (PVM, no PCID) 13.1-13.9 µs at 50 ms, 9.6-10.4 at
// 100 and 7.6-8.7 at 200. A request that must see every record so far
// does not wait for the poll: it kicks the reader (Barrier, Kick, Reached;
// tracker.Sync); a ring half full wakes it; so the poll bounds only how
// late a flowing event reaches the graph, the feed (whose process lines
// wait up to a second anyway) and `events`.
const straggleWait = 200 * time.Millisecond

// lostCheckEvery bounds how many records Read decodes between two looks at
// the kernel's lost counter while the ring buffer never drains.
const lostCheckEvery = 4096

// Source delivers process events from the eBPF tracepoint programs. It
// implements events.Source. Read must be called from one goroutine at a
// time; Stats and Close may be called from any goroutine.
type Source struct {
	boot procfs.BootID
	rd   recordReader
	// lost reads the kernel's count of records it could not reserve.
	lost func() (uint64, error)
	// release closes the kernel objects (links, programs, maps); called by
	// Close after the reader is closed and Read has returned.
	release func() error

	// readMu is held by Read for its whole call, so that Close can wait for
	// a Read it interrupted before releasing the maps Read uses.
	readMu     sync.Mutex
	rec        ringbuf.Record
	strs       strs               // the last exec's strings (decode)
	readErr    error              // result of the last tryRead
	try        func(uintptr) bool // s.tryRead, made once
	lostSeen   uint64             // lost counter value already reported
	sinceCheck int                // records since the last look at the lost counter
	checkLost  bool
	sawData    bool // a record arrived since the read deadline was set
	quiet      bool // no deadline: asleep until the program wakes us
	settling   bool // reader_asleep set, one last look at the ring due
	// straggle is straggleWait, but in tests of the wake-up protocol,
	// which need the reader quiet on a host busy with other tests.
	straggle time.Duration
	// asleep is the reader_asleep flag shared with the programs (a
	// memory-mapped array element): 1 while quiet. Nil in replay tests.
	asleep *uint32
	// skipBlobs is the skip_blobs flag the exec program reads (a
	// memory-mapped array element): 1 while exec records are to carry no
	// blobs (SetExecBlobs). Nil without WithExecPath and in replay tests.
	skipBlobs *uint32
	// sharedMu orders what other goroutines do with the kernel's memory
	// and descriptors (SetExecBlobs, Barrier, Kick) before Close releases
	// them.
	sharedMu sync.Mutex
	// ring is rd when it is the mapped ring (nil in replay tests and with
	// cilium's reader); done is the ring position up to which every
	// record was handed out and the caller came back for the next (or was
	// discarded): see Barrier.
	ring *mmapRing
	done atomic.Uint64
	// ready, when set, waits for the ring in the runtime's netpoller; rd
	// (an mmapRing) then never blocks and deadline is the one Read wants.
	// Nil in replay tests and without the netpoller: rd blocks until
	// deadline.
	ready    *readyWaiter
	deadline time.Time

	// progs are the attached programs by event kind, for tests and
	// benchmarks that read their size and run-time statistics.
	progs map[string]*ebpf.Program

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error

	nEvents, nLost, nLostReports, nDecodeErrors atomic.Uint64
}

var _ events.Source = (*Source)(nil)

// newSource wires a Source around a record reader; New passes the ring
// buffer, tests a fake.
func newSource(boot procfs.BootID, rd recordReader, lost func() (uint64, error), release func() error) *Source {
	s := &Source{boot: boot, rd: rd, lost: lost, release: release, quiet: true, straggle: straggleWait}
	s.try = s.tryRead
	return s
}

// objects are the kernel objects New loads; the exit program is
// handle_exit or, on kernels before 6.16, handle_exit_live under the same
// name (see New).
type objects struct {
	Events  *ebpf.Map     `ebpf:"events"`
	Lost    *ebpf.Map     `ebpf:"lost"`
	Scratch *ebpf.Map     `ebpf:"scratch"`
	Asleep  *ebpf.Map     `ebpf:"reader_asleep"`
	Skip    *ebpf.Map     `ebpf:"skip_blobs"`
	Fork    *ebpf.Program `ebpf:"handle_fork"`
	Exec    *ebpf.Program `ebpf:"handle_exec"`
	Exit    *ebpf.Program `ebpf:"handle_exit"`
}

func (o *objects) close() error {
	var errs []error
	for _, c := range []interface{ Close() error }{o.Fork, o.Exec, o.Exit, o.Events, o.Lost, o.Scratch, o.Asleep, o.Skip} {
		if c == nil {
			continue
		}
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// Option configures New.
type Option func(*config)

type config struct {
	execPath bool
	argvMax  int
}

// WithExecPath makes fork and exec events carry the process context
// (Event.Ctx), and exec events the resolved executable path (Event.Exe),
// the working directory, the cgroup path and container id (Event.Exec) and
// the arguments (Event.Argv, at most the WithArgvMax bound). Decoding an
// exec event then allocates its strings; other events still do not
// allocate.
func WithExecPath() Option { return func(c *config) { c.execPath = true } }

// WithArgvMax bounds the argument bytes an exec event carries (NULs
// included); past it Event.Exec.ArgsTruncated is set. n is clamped to
// [0, MaxArgvMax]; the default is DefaultArgvMax.
func WithArgvMax(n int) Option {
	return func(c *config) { c.argvMax = max(0, min(n, MaxArgvMax)) }
}

// Fixed part of the scratch value (bpf/process.bpf.c: struct scratch and
// AREA): the cursor, the exec record and the path area.
const scratchFixed = 8 + execFixedSize + 16384

// New checks that this host can run the eBPF source, loads the programs and
// attaches them. Events are buffered from the moment New returns, so a
// caller can scan /proc next and then drain with Read without missing a
// process born in between. boot is the boot id tokens are stamped with.
//
// An error wrapping events.ErrUnavailable says why the mechanism cannot
// run here (no BTF, missing capabilities, a nested pid namespace, an old
// kernel, a program the verifier rejects); callers fall back to another
// mechanism on it.
func New(boot procfs.BootID, opts ...Option) (*Source, error) {
	cfg := config{argvMax: DefaultArgvMax}
	for _, o := range opts {
		o(&cfg)
	}
	if err := checkHost(); err != nil {
		return nil, err
	}
	exitHasGroupDead, err := exitTracepointHasGroupDead()
	if err != nil {
		return nil, err
	}
	spec, err := loadProcess()
	if err != nil {
		return nil, fmt.Errorf("tracepoint: %w", err)
	}
	if !exitHasGroupDead {
		spec.Programs[processProgHandleExit] = spec.Programs[processProgHandleExitLive]
	}
	if cfg.execPath {
		if err := setContext(spec, cfg.argvMax); err != nil {
			return nil, err
		}
	}
	if err := setWakeup(spec); err != nil {
		return nil, err
	}
	var objs objects
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		return nil, fmt.Errorf("tracepoint: load eBPF objects: %w: %w", events.ErrUnavailable, err)
	}
	page := os.Getpagesize()
	asleepMem, err := unix.Mmap(objs.Asleep.FD(), 0, page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		objs.close()
		return nil, fmt.Errorf("tracepoint: map reader_asleep: %w", err)
	}
	// The reader starts asleep (Source.quiet): the first record wakes it.
	asleep := (*uint32)(unsafe.Pointer(&asleepMem[0]))
	atomic.StoreUint32(asleep, 1)
	// The lost counter is read through its mapping too: a lookup was a
	// system call each time the ring drained (see mmapRing).
	lostMem, err := unix.Mmap(objs.Lost.FD(), 0, page, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		unix.Munmap(asleepMem)
		objs.close()
		return nil, fmt.Errorf("tracepoint: map lost counter: %w", err)
	}
	lost := (*uint64)(unsafe.Pointer(&lostMem[0]))
	skipMem, err := unix.Mmap(objs.Skip.FD(), 0, page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Munmap(asleepMem)
		unix.Munmap(lostMem)
		objs.close()
		return nil, fmt.Errorf("tracepoint: map skip_blobs: %w", err)
	}
	var links []link.Link
	var ring *mmapRing
	releaseAll := func() error {
		var errs []error
		for i := len(links) - 1; i >= 0; i-- {
			errs = append(errs, links[i].Close())
		}
		if ring != nil {
			errs = append(errs, ring.unmap())
		}
		errs = append(errs, objs.close(), unix.Munmap(asleepMem), unix.Munmap(lostMem), unix.Munmap(skipMem))
		return errors.Join(errs...)
	}
	// The ring is read through its mapping, and waited for in the
	// netpoller (readyWaiter), when the runtime can poll it; else through
	// cilium/ebpf's reader, which blocks in epoll_wait.
	var rd recordReader
	ready, err := newReadyWaiter(objs.Events.FD())
	if err == nil {
		ring, err = newMmapRing(objs.Events.FD(), int(objs.Events.MaxEntries()))
		if err != nil {
			ready.closeAll()
			releaseAll()
			return nil, fmt.Errorf("tracepoint: %w", err)
		}
		rd = ring
	} else {
		ready = nil
		r, err := ringbuf.NewReader(objs.Events)
		if err != nil {
			releaseAll()
			return nil, fmt.Errorf("tracepoint: ring buffer reader: %w", err)
		}
		rd = r
	}
	// Exit first, fork last: a process whose fork is seen then has its
	// exit seen too. An exit without its fork is harmless (the /proc scan
	// knows the process).
	for _, p := range []struct {
		name string
		prog *ebpf.Program
	}{{"sched_process_exit", objs.Exit}, {"sched_process_exec", objs.Exec}, {"sched_process_fork", objs.Fork}} {
		l, err := link.AttachTracing(link.TracingOptions{Program: p.prog})
		if err != nil {
			if ready != nil {
				ready.closeAll()
			}
			rd.Close()
			releaseAll()
			if errors.Is(err, ebpf.ErrNotSupported) {
				return nil, fmt.Errorf("tracepoint: attach %s: %w: %w", p.name, events.ErrUnavailable, err)
			}
			return nil, fmt.Errorf("tracepoint: attach %s: %w", p.name, err)
		}
		links = append(links, l)
	}
	s := newSource(boot, rd, func() (uint64, error) { return atomic.LoadUint64(lost), nil }, releaseAll)
	s.asleep = asleep
	if cfg.execPath {
		s.skipBlobs = (*uint32)(unsafe.Pointer(&skipMem[0]))
	}
	s.ready, s.ring = ready, ring
	s.progs = map[string]*ebpf.Program{"fork": objs.Fork, "exec": objs.Exec, "exit": objs.Exit}
	return s, nil
}

// setContext turns on the context capture with an argv bound of argvMax
// bytes: the scratch map gets one entry per possible CPU, each large enough
// for a whole exec record, and the ring buffer room for at least 16 of
// them.
func setContext(spec *ebpf.CollectionSpec, argvMax int) error {
	for name, val := range map[string]any{processVarWantContext: true, processVarArgvMax: uint32(argvMax)} {
		v, ok := spec.Variables[name]
		if !ok {
			return fmt.Errorf("tracepoint: embedded object has no %s", name)
		}
		if err := v.Set(val); err != nil {
			return fmt.Errorf("tracepoint: set %s: %w", name, err)
		}
	}
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		return fmt.Errorf("tracepoint: possible CPUs: %w", err)
	}
	scratch := spec.Maps[processMapScratch]
	scratch.MaxEntries = uint32(cpus)
	scratch.ValueSize = uint32(scratchFixed + argvMax)
	ring := spec.Maps[processMapEvents]
	for ring.MaxEntries < max(16*scratch.ValueSize, contextRingMin) {
		ring.MaxEntries *= 2
	}
	return nil
}

// contextRingMin is the least ring a capture with context gets: a storm of
// execs with 4 KiB of arguments (about 32 MB/s on a 2-core VM) takes 60 ms
// to fill half of it, so that the programs wake the reader (a self-IPI,
// charged to the exec being reported) at most every 60 ms, not per record.
// Without context the records are small: at 10,000 execs a second half of
// the program's 1 MiB lasts over 100 ms.
const contextRingMin = 4 << 20

// setWakeup tells the programs to wake a polling reader early once half the
// ring, as sized now, is waiting (wakeup_bytes in bpf/process.bpf.c).
func setWakeup(spec *ebpf.CollectionSpec) error {
	v, ok := spec.Variables[processVarWakeupBytes]
	if !ok {
		return fmt.Errorf("tracepoint: embedded object has no %s", processVarWakeupBytes)
	}
	if err := v.Set(spec.Maps[processMapEvents].MaxEntries / 2); err != nil {
		return fmt.Errorf("tracepoint: set %s: %w", processVarWakeupBytes, err)
	}
	return nil
}

// Initial pid namespace inode (PROC_PID_INIT_INO in include/linux/proc_ns.h):
// fixed, while every other namespace gets a number allocated at creation.
const initPidNSIno = 0xEFFFFFFC

// Capabilities (include/uapi/linux/capability.h).
const (
	capSysAdmin = 21
	capPerfmon  = 38
	capBPF      = 39
)

// checkHost reports, as an error wrapping events.ErrUnavailable, the first
// reason this host cannot run the programs.
func checkHost() error {
	unavailable := func(format string, args ...any) error {
		return fmt.Errorf("tracepoint: %s: %w", fmt.Sprintf(format, args...), events.ErrUnavailable)
	}
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		return unavailable("no kernel BTF at /sys/kernel/btf/vmlinux (%v)", err)
	}
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/pid", &st); err != nil {
		return unavailable("cannot tell the pid namespace: stat /proc/self/ns/pid: %v", err)
	}
	if st.Ino != initPidNSIno {
		return unavailable("not in the initial pid namespace (pid namespace inode %d): the kernel reports pids this namespace cannot see", st.Ino)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return unavailable("capget: %v", err)
	}
	eff := uint64(data[0].Effective) | uint64(data[1].Effective)<<32
	has := func(c uint) bool { return eff&(1<<c) != 0 }
	if !has(capSysAdmin) && !(has(capBPF) && has(capPerfmon)) {
		return unavailable("missing CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN)")
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return unavailable("raise RLIMIT_MEMLOCK: %v", err)
	}
	// Ring buffers arrived in 5.8, after tp_btf (5.5), so this probe covers
	// both; the btf_trace_ typedef lookup in exitTracepointHasGroupDead
	// confirms tp_btf. (features.HaveProgramType(ebpf.Tracing) is not used:
	// its probe fails with EPERM on kernels that load tp_btf fine.)
	if err := features.HaveMapType(ebpf.RingBuf); errors.Is(err, ebpf.ErrNotSupported) {
		return unavailable("kernel too old: no BPF ring buffer (Linux 5.8+): %v", err)
	} else if err != nil {
		return unavailable("probe BPF ring buffer: %v", err)
	}
	return nil
}

// exitTracepointHasGroupDead reports whether sched_process_exit passes
// group_dead (Linux 6.16+), from the tracepoint's prototype in kernel BTF.
func exitTracepointHasGroupDead() (bool, error) {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return false, fmt.Errorf("tracepoint: kernel BTF: %w: %w", events.ErrUnavailable, err)
	}
	var td *btf.Typedef
	if err := spec.TypeByName("btf_trace_sched_process_exit", &td); err != nil {
		return false, fmt.Errorf("tracepoint: no sched_process_exit in kernel BTF: %w: %w", events.ErrUnavailable, err)
	}
	ptr, ok := td.Type.(*btf.Pointer)
	if !ok {
		return false, fmt.Errorf("tracepoint: sched_process_exit prototype is %v: %w", td.Type, events.ErrUnavailable)
	}
	proto, ok := ptr.Target.(*btf.FuncProto)
	if !ok {
		return false, fmt.Errorf("tracepoint: sched_process_exit prototype is %v: %w", ptr.Target, events.ErrUnavailable)
	}
	// (void *data, struct task_struct *p[, bool group_dead])
	return len(proto.Params) >= 3, nil
}

// Mechanism returns events.EBPF.
func (s *Source) Mechanism() events.Mechanism { return events.EBPF }

// Read blocks until the next event and fills ev; it does not allocate. An
// exec's strings are in memory the next Read reuses (see events.Event).
// Records that do not decode are counted in Stats.DecodeErrors and skipped.
// When the kernel has dropped records since the last look, Read delivers
// one events.Lost event whose Count is the number dropped. After Close,
// Read returns events.ErrClosed.
func (s *Source) Read(ev *events.Event) error {
	s.readMu.Lock()
	defer s.readMu.Unlock()
	// The caller is done with the record handed out last.
	s.markDone()
	for {
		if s.closed.Load() {
			return events.ErrClosed
		}
		if s.checkLost {
			s.checkLost = false
			n, err := s.lost()
			if err != nil {
				if s.closed.Load() {
					return events.ErrClosed
				}
				return fmt.Errorf("tracepoint: read lost counter: %w", err)
			}
			if n > s.lostSeen {
				d := n - s.lostSeen
				s.lostSeen = n
				s.nLost.Add(d)
				s.nLostReports.Add(1)
				*ev = events.Event{Kind: events.Lost, Mechanism: events.EBPF, Count: d}
				return nil
			}
		}
		if err := s.readRecord(); err != nil {
			if errors.Is(err, ringbuf.ErrClosed) || errors.Is(err, os.ErrClosed) || s.closed.Load() {
				return events.ErrClosed
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				// The ring is drained: look at the lost counter (the last
				// record read may not have said so: a discarded wake-up
				// record can follow it, see wake_reader).
				s.checkLost = true
				switch {
				case s.sawData:
					s.sawData = false
					s.setDeadline(time.Now().Add(s.straggle))
				case !s.settling:
					// A quiet stretch: say so (reader_asleep), then look
					// at the ring once more without waiting. A record
					// committed before the flag was seen is found by that
					// look; one after it wakes us (see wake_reader).
					s.settling = true
					s.setAsleep(1)
					s.setDeadline(time.Now())
				default:
					s.quiet = true
					s.setDeadline(time.Time{})
				}
				continue
			}
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			return fmt.Errorf("tracepoint: read ring buffer: %w", err)
		}
		s.sawData = true
		if s.quiet || s.settling {
			s.quiet, s.settling = false, false
			s.setAsleep(0)
			s.setDeadline(time.Now().Add(s.straggle))
		}
		// Look at the lost counter once the buffer is drained (drops happen
		// only while it is full, so they are then behind us) or, under a
		// storm that never drains, every lostCheckEvery records. Remaining
		// comes with the record: asking the reader (AvailableBytes) would
		// race with a concurrent Close.
		s.sinceCheck++
		if s.sinceCheck >= lostCheckEvery || s.rec.Remaining == 0 {
			s.sinceCheck = 0
			s.checkLost = true
		}
		if err := decode(s.rec.RawSample, s.boot, ev, &s.strs); err != nil {
			s.nDecodeErrors.Add(1)
			continue
		}
		s.nEvents.Add(1)
		return nil
	}
}

// setDeadline sets how long the next read waits for a record.
func (s *Source) setDeadline(t time.Time) {
	s.deadline = t
	if s.ready == nil {
		s.rd.SetDeadline(t)
	}
}

// readRecord reads the next record into s.rec. Without a netpoller waiter
// it is rd.ReadInto with the deadline set. With one, rd never blocks: a
// drained ring is waited for in the netpoller until s.deadline (forever
// when zero), unless the deadline is already due.
// The result and the try function live in s, so that a read allocates
// nothing.
func (s *Source) readRecord() error {
	if !s.tryRead(0) && s.ready != nil && (s.deadline.IsZero() || time.Now().Before(s.deadline)) {
		// Drained: every record so far was handed out (and taken back, as
		// Read was called again) or discarded.
		s.markDone()
		return s.ready.wait(s.deadline, s.try, &s.readErr)
	}
	return s.readErr
}

// markDone publishes, for Reached, the ring position up to which no record
// is left for the caller: called where no record handed out by this Read
// is pending.
func (s *Source) markDone() {
	if s.ring != nil {
		s.done.Store(s.ring.next)
	}
}

// Barrier returns the ring's producer position now: every record the
// programs had reserved by then (a fork, exec or exit that returned to its
// caller before Barrier was called) lies before it. Once Reached says so
// for that position, Read has handed each of them out and been called
// again, so the caller of Read has dealt with them. ok is false when the
// source cannot tell (cilium's reader, replay tests, after Close).
func (s *Source) Barrier() (pos uint64, ok bool) {
	if s.ring == nil {
		return 0, false
	}
	s.sharedMu.Lock()
	defer s.sharedMu.Unlock()
	if s.closed.Load() {
		return 0, false
	}
	return atomic.LoadUint64(s.ring.prodPos), true
}

// KernelLost returns the kernel's count of records it could not reserve
// as it is now: Read reports losses only when it looks at the counter (the
// ring drained, or every lostCheckEvery records), so a record lost before
// a Barrier may not yet be a Lost event when Reached says the barrier is
// passed. ok is false once the source is closed. Safe from any goroutine.
func (s *Source) KernelLost() (n uint64, ok bool) {
	if s.lost == nil {
		return 0, false
	}
	s.sharedMu.Lock()
	defer s.sharedMu.Unlock()
	if s.closed.Load() {
		return 0, false
	}
	n, err := s.lost()
	return n, err == nil
}

// Reached reports whether Read has dealt with every record before pos (a
// Barrier).
func (s *Source) Reached(pos uint64) bool { return s.done.Load() >= pos }

// Kick makes a Read waiting for its straggle poll look at the ring now:
// the programs submit most records without waking it, so that a caller
// of Barrier would otherwise wait for the poll. Safe from any goroutine.
func (s *Source) Kick() {
	if s.ready == nil {
		return
	}
	s.sharedMu.Lock()
	defer s.sharedMu.Unlock()
	if !s.closed.Load() {
		s.ready.kick()
	}
}

// tryRead reads the next record into s.rec and its error into s.readErr,
// and reports whether the read is over (anything but a drained ring). Its
// argument is the file descriptor syscall.RawConn.Read passes, unused.
func (s *Source) tryRead(uintptr) bool {
	s.readErr = s.rd.ReadInto(&s.rec)
	return !errors.Is(s.readErr, os.ErrDeadlineExceeded)
}

// setAsleep stores v in the reader_asleep flag the programs read, with a
// sequentially consistent store: a full barrier before the ring is read.
func (s *Source) setAsleep(v uint32) {
	if s.asleep != nil {
		atomic.StoreUint32(s.asleep, v)
	}
}

// SetExecBlobs says whether exec events are to carry what the program
// captures beside the context: the executable, working directory and
// cgroup paths and the arguments (WithExecPath; on until told otherwise).
// A consumer that shows none of it turns it off while it shows none: the
// program then skips the path walks and the argument copy, and the events
// of execs it ran meanwhile have those fields absent (empty), never
// another exec's. The switch reaches programs already running at once,
// and records already in the ring keep what they carry. SetExecBlobs may
// be called from any goroutine; without WithExecPath it does nothing.
func (s *Source) SetExecBlobs(on bool) {
	if s.skipBlobs == nil {
		return
	}
	var v uint32
	if !on {
		v = 1
	}
	s.sharedMu.Lock()
	defer s.sharedMu.Unlock()
	if !s.closed.Load() {
		atomic.StoreUint32(s.skipBlobs, v)
	}
}

// Stats returns the counts so far. Events counts fork, exec and exit events
// delivered; Lost events are counted in LostReports.
func (s *Source) Stats() events.Stats {
	return events.Stats{
		Events:       s.nEvents.Load(),
		Lost:         s.nLost.Load(),
		LostReports:  s.nLostReports.Load(),
		DecodeErrors: s.nDecodeErrors.Load(),
	}
}

// Close detaches the programs and frees the kernel objects. It closes the
// ring buffer reader first, so a blocked Read returns events.ErrClosed,
// waits for that Read to return, then closes the links, programs and maps.
// Close is safe to call more than once and from any goroutine.
func (s *Source) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		var errReady error
		if s.ready != nil {
			errReady = s.ready.close()
		}
		errRd := s.rd.Close()
		s.readMu.Lock()
		defer s.readMu.Unlock()
		var errRel error
		s.sharedMu.Lock()
		if s.ready != nil {
			errReady = errors.Join(errReady, s.ready.release())
		}
		if s.release != nil {
			errRel = s.release()
		}
		s.sharedMu.Unlock()
		if err := errors.Join(errReady, errRd, errRel); err != nil {
			s.closeErr = fmt.Errorf("tracepoint: close: %w", err)
		}
	})
	return s.closeErr
}
