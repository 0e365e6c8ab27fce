// Package xnu judges, finds and signals process instances on macOS by the
// ids the XNU kernel keeps for them, so that a signal reaches exactly the
// instance that was judged, never a process that took its pid over.
//
// The mechanism, in the small interface the code calls (Kernel, Watcher):
//
//   - Identity: proc_pidinfo flavor PROC_PIDT_BSDINFOWITHUNIQID (18) returns,
//     from one process reference, the BSD info (pid, ppid, uids, start time
//     in µs) and p_uniqueid, p_puniqueid, p_idversion; it needs the same uid
//     or root. Flavor PROC_PIDUNIQIDENTIFIERINFO (17) returns the ids alone
//     for any uid. With arg 0 neither answers for a zombie (ESRCH).
//   - Pids: proc_listallpids lists live processes and zombies.
//   - Signal: proc_signal_with_audittoken(audit_token_t *, int) (libproc,
//     macOS 14.4 and later) finds the process by the token's pid (val[5]),
//     refuses with ESRCH unless its pid version equals val[7], checks the
//     caller may signal it, and signals it under the reference it found.
//     The token is built from the reply that judged the instance. The
//     symbol is looked up at run time (dlsym); where it is absent nothing
//     is signalled and the caller is told why: there is no fallback to
//     kill(2), which names a pid, not an instance.
//   - Watch: kqueue EVFILT_PROC with NOTE_FORK|NOTE_EXEC|NOTE_EXIT attaches
//     to the instance found at attach time and follows it across exec; it
//     is refused (ESRCH) for a zombie; NOTE_FORK does not say which child.
//
// Identity and lineage: p_uniqueid is new on every fork, never reused
// within a boot and kept across exec; p_puniqueid is the parent's uniqueid
// at fork and does not change when the process is reparented; p_idversion
// changes on every fork and every exec. A token (internal/token) carries
// the uniqueid, and descendants are the transitive closure over p_puniqueid
// from the root's uniqueid (Lineage), so ghosts reparented to launchd are
// still found while the chain is known. A chain through an intermediate
// that exited before it was ever recorded cannot be proven: what may hang
// from it is reported, never signalled. While the root lives, EVFILT_PROC
// on the recorded members turns every fork into a rescan (Lineage.Pump),
// which records intermediates before they exit.
//
// Pids are allocated sequentially from the last one handed out, wrapping at
// PID_MAX (99,999) back to 100 and skipping pids still held by a process
// (live or zombie), a process group or a session; a reaped pid can come
// back after very few forks.
//
// What was checked in XNU's published source (apple-oss-distributions/xnu
// and apple/darwin-xnu, read through the search tool):
//
//   - bsd/sys/proc_info_private.h: PROC_PIDUNIQIDENTIFIERINFO 17,
//     PROC_PIDT_BSDINFOWITHUNIQID 18, struct proc_uniqidentifierinfo
//     (p_uuid[16], p_uniqueid, p_puniqueid, int32 p_idversion, int32
//     p_orig_ppidversion, two uint64 reserved; static_assert size 56),
//     struct proc_bsdinfowithuniqid (proc_bsdinfo then the above),
//     PROC_INFO_CALL_SIGNAL_AUDITTOKEN 0x11.
//   - bsd/sys/proc_info.h: struct proc_bsdinfo (136 bytes, start seconds
//     and microseconds at 120 and 128).
//   - bsd/kern/proc_info.c: proc_pidinfo sizes flavors 17 and 18, looks
//     for zombies only when arg is non-zero, exempts 17 (not 18) from the
//     same-user check; proc_listpids walks allproc then zombproc;
//     proc_signal_with_audittoken copies in an audit_token_t, takes pid
//     from val[5], proc_find (no zombies), compares proc_pidversion with
//     val[7] (ESRCH), cansignal (EPERM), psignal, proc_rele.
//   - bsd/kern/kern_fork.c (forkproc): the pid loop (++pid, wrap to 100 at
//     PID_MAX, skip a pid in the proc hash, a pgrp or a session),
//     p_idversion = ++nextpidversion and p_uniqueid = ++nextuniqueid on
//     fork; the exec copy keeps pid, uniqueid and start time.
//   - XNU test "ensure_pidversion_changes_on_exec" (rdar://128791723): the
//     pid version read through flavor 18 changes across exec.
//   - bsd/kern/kern_proc.c: proc_ref refuses a zombie or an exiting
//     process, so proc_find does not return one.
//   - bsd/kern/kern_event.c filt_procattach: NOTE_TRACK, NOTE_TRACKERR and
//     NOTE_CHILD fail with ENOTSUP; proc_find failing (gone or zombie)
//     fails the attach with ESRCH.
//   - audit_token_t is unsigned int val[8] (osfmk/mach/message.h); the
//     kernel reads val[5] (pid) and val[7] (pid version) only.
//
// Limits: none of this ran on a Mac here. The logic is proven against a
// simulated kernel in the tests (sim_test.go) and the darwin code is only
// cross-compiled; scripts/macos-check.sh performs the checks a real macOS
// 14.4+ run must confirm. The pid version is a 32-bit counter: a token
// whose instance exited names another only after 2^32 forks and execs.
// Whether the uniqueid is also checked by proc_signal_with_audittoken on
// newer kernels was not confirmed; the pid version check suffices.
package xnu
