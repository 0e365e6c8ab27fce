// Package fallback infers process events by polling the process table, for
// hosts where neither eBPF nor the netlink proc connector can run: macOS
// (sysctl kern.proc.all, or ps(1) as the last resort) and restricted Linux
// hosts (/proc, or ps).
//
// A Snapshotter (Proc, PS, Sysctl) takes one Snapshot of the table. A Poller
// turns successive snapshots into events.Source events: a pid that appears,
// or whose start token changed, is an inferred Fork (after an inferred Exit
// of the instance it replaced); a pid that disappears is an inferred Exit.
// Inferred events carry Inferred = true, no exit status (see StatusUnknown)
// and no time. A snapshot that fails is never an empty world: it is logged,
// counted and delivered as an events.Lost gap, and nothing is judged from
// it. ReadToken and JudgeOnce take a single look, for a caller without a
// poller (the CLI on macOS).
//
// Limits, which Judge and Continuity.Member enforce:
//
//   - Polling sees no exits between two looks. A process that exits and whose
//     pid is reissued between two polls is only visible if the new start token
//     differs; inside one token granule (10 ms for /proc ticks, 1 s for ps
//     lstart) the reissue is invisible. Tokens say their precision, and a
//     coarse token never proves OWNED by itself.
//   - Continuity (a claim seen with the same token in every successful
//     snapshot since it was made, with no failed or late poll) is needed but
//     not sufficient: Judge also requires that the claim was made after the
//     token's granule had closed, because a same-granule reissue between the
//     claim and the first poll would look identical. See Judge.
//   - Ancestry is today's ppid chain, read process by process. A chain counts
//     only when it was the same, instance by instance, in two consecutive
//     snapshots; anything else is unverified, never a ghost to reap.
//   - ps output is parsed with fixed columns under LC_ALL=C and TZ=UTC0. Its
//     start time is whole seconds (and on Linux is computed by ps from the
//     boot time, which moves when the wall clock is stepped: a step of a
//     second or more makes an old ps token look Different, which errs on the
//     side of FOREIGN, never OWNED). A line that is not a process row (an
//     argument with a newline) makes the whole table implausible. A whole
//     forged row hidden after a newline in an argument cannot be told from a
//     real one by parsing: procps prints control characters as '?', so it
//     cannot happen with Linux ps; on macOS ps is the last resort behind
//     sysctl for this reason.
//   - On macOS, kern.proc start times are wall-clock microseconds derived
//     from the boot time; a wall-clock step moves them. Paths compare
//     case-insensitively after cleaning (SamePath), without Unicode
//     normalisation.
package fallback
