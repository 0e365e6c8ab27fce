package view

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/procsupervisor/supervisor/internal/api"
	"github.com/procsupervisor/supervisor/internal/store"
	"github.com/procsupervisor/supervisor/internal/userdb"
	"github.com/procsupervisor/supervisor/internal/verdict"
)

// maxCommand bounds the COMMAND column of a claim list, in columns.
const maxCommand = 60

// users names the uids of claims' creators (USER in Claims): from the
// local files, never through NSS (userdb), so a list names no user that
// only a network directory knows.
var users = userdb.Local()

// userName is the name of uid in the local user database, else the uid.
func userName(uid uint32) string {
	if n, ok := users.User(uid); ok {
		return n
	}
	return strconv.FormatUint(uint64(uid), 10)
}

// Claims lists claims, one a row, with their age at now and their result.
// USER is who created the claim (the uid the daemon saw connect, named);
// OWNER is a label its creator chose, which any user may set to anything.
func Claims(w io.Writer, cs []api.Claim, now time.Time) {
	rows := [][]string{{"ID", "KIND", "STATE", "AGE", "PID", "VERDICT", "USER", "OWNER", "RESULT", "COMMAND"}}
	for _, cl := range cs {
		owner, v := cl.Owner, "-"
		if owner == "" {
			owner = "-"
		}
		if cl.LastVerdict != nil {
			v = cl.LastVerdict.Result.String()
		}
		rows = append(rows, []string{cl.ID, string(cl.Kind), string(cl.State), Age(now.Sub(cl.CreatedAt)),
			strconv.Itoa(int(cl.Pid)), v, userName(cl.UID), owner, Result(cl, now), Cut(strings.Join(cl.Argv, " "), maxCommand)})
	}
	table(w, rows)
}

// Filter keeps the claims whose state is open (live) unless all is set.
// open is the daemon's rule (daemon.Open), passed in so that this package
// does not decide which states are live.
func Filter(cs []api.Claim, all bool, open func(store.State) bool) []api.Claim {
	if all {
		return cs
	}
	out := cs[:0:0]
	for _, cl := range cs {
		if open(cl.State) {
			out = append(out, cl)
		}
	}
	return out
}

// Age is a duration as a person reads an age: the largest unit, whole
// (45s, 12m, 3h, 5d). A negative duration (a clock step) is "0s".
func Age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(max(d, 0)/time.Second)) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d/time.Minute)) + "m"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d/time.Hour)) + "h"
	}
	return strconv.Itoa(int(d/(24*time.Hour))) + "d"
}

// Cut shortens s to at most n columns (counted as cutAt does: two for
// every character but ASCII), the last two of them "…" when it cut; n <=
// 0 leaves s whole.
func Cut(s string, n int) string {
	if n <= 0 {
		return s
	}
	i, whole := cutAt(s, n)
	if whole {
		return s
	}
	if n < 2 {
		return s[:i]
	}
	return s[:i] + cutMark
}

// Result says how a claim ended, or where its ending stands: "exited (3)",
// "killed by SIGKILL", "released: wall clock", "released: holder gone",
// "2 survivors", "grace ends in 8s". It is "-" for a claim running
// normally.
func Result(cl api.Claim, now time.Time) string {
	switch cl.State {
	case store.Running:
		switch {
		case cl.Deadline.IsZero():
		case cl.Deadline.After(now):
			return "wall clock in " + Age(cl.Deadline.Sub(now).Round(time.Second))
		default:
			return "wall clock due"
		}
		return "-"
	case store.Releasing:
		if !cl.GraceUntil.IsZero() {
			return "grace ends in " + Age(cl.GraceUntil.Sub(now).Round(time.Second))
		}
		return "tearing down"
	case store.Survivors:
		if r := cl.Release; r != nil {
			// The record keeps the start of long lists and their totals.
			n, u := max(len(r.Survivors), r.SurvivorsTotal), max(len(r.Unproven), r.UnprovenTotal)
			switch {
			case u == 0:
				return plural(n, "survivor")
			case n == 0:
				return strconv.Itoa(u) + " unproven left"
			}
			return plural(n, "survivor") + ", " + strconv.Itoa(u) + " unproven"
		}
		return "survivors"
	case store.Unverifiable, store.Dropped:
		if v := cl.LastVerdict; v != nil {
			return v.Result.String() + ": " + v.Reason
		}
		return string(cl.State)
	case store.Exited:
		return exit(cl)
	case store.Retired:
		return "retired: " + cl.RetiredReason
	case store.Released:
		return "released: " + cause(cl)
	}
	return string(cl.State)
}

// exit is a job's end: its exit code or the signal that killed it.
func exit(cl api.Claim) string {
	switch {
	case cl.ExitCode != nil:
		return fmt.Sprintf("exited (%d)", *cl.ExitCode)
	case cl.ExitSignal != 0:
		return "killed by " + SignalName(cl.ExitSignal)
	case cl.RetiredReason != "":
		return "exited: " + cl.RetiredReason
	}
	return "exited"
}

// cause is why a grant was released: what the daemon recorded, else what
// the record shows (the root already gone, a wall clock run out).
func cause(cl api.Claim) string {
	r := cl.Release
	switch {
	case r == nil:
		return "unknown"
	case r.Cause != "":
		return r.Cause + teardownNote(r)
	case r.Ownership == verdict.Gone:
		return "root exited"
	case !cl.Deadline.IsZero() && !r.At.Before(cl.Deadline):
		return "wall clock" + teardownNote(r)
	}
	return "released" + teardownNote(r)
}

// teardownNote adds what a teardown had to do beyond SIGTERM.
func teardownNote(r *api.Release) string {
	switch {
	case len(r.Unproven) > 0:
		// The record may keep only the start of a long list.
		return " (" + plural(max(len(r.Unproven), r.UnprovenTotal), "unproven process") + " left)"
	case r.Escalated:
		return " (SIGKILL needed)"
	}
	return ""
}

// SignalName names a signal number as the kernel's headers do (SIGKILL),
// or "signal N" for one this system does not know.
func SignalName(n int) string {
	if s := unix.SignalName(syscall.Signal(n)); s != "" {
		return s
	}
	return "signal " + strconv.Itoa(n)
}

func plural(n int, what string) string {
	s := strconv.Itoa(n) + " " + what
	if n != 1 {
		if strings.HasSuffix(s, "s") {
			return s + "es"
		}
		return s + "s"
	}
	return s
}

// Launched prints a launched claim on one line: its id, pid and token.
func Launched(w io.Writer, cl api.Claim) {
	fmt.Fprintf(w, "%s %d %s\n", Sanitize(cl.ID), cl.Pid, cl.Token)
}

// Show prints one claim in full, one field a line: who and what it is, its
// root and holder, its times, its last verdict, its result and members.
func Show(w io.Writer, cl api.Claim, now time.Time) {
	var rows [][]string
	add := func(k, v string) {
		if v != "" {
			rows = append(rows, []string{k + ":", v})
		}
	}
	at := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		rel := Age(now.Sub(t)) + " ago"
		if t.After(now) {
			rel = "in " + Age(t.Sub(now))
		}
		return t.Local().Format(time.RFC3339) + " (" + rel + ")"
	}
	add("id", cl.ID)
	add("kind", string(cl.Kind))
	add("state", string(cl.State))
	add("result", Result(cl, now))
	add("owner", cl.Owner)
	add("uid", fmt.Sprintf("%d (gid %d)", cl.UID, cl.GID))
	if cl.ArgsRedacted {
		add("command", quoteArgv(cl.Argv)+"  (arguments redacted)")
	} else {
		add("command", quoteArgv(cl.Argv))
	}
	add("cwd", cl.Cwd)
	if cl.Pid != 0 {
		add("root", fmt.Sprintf("%d %s", cl.Pid, cl.Token))
	} else {
		add("root", "not started")
	}
	if cl.Pgid != 0 {
		add("pgid", strconv.Itoa(int(cl.Pgid)))
	}
	add("cgroup", cl.Cgroup)
	if h := cl.Holder; h != nil {
		add("holder", fmt.Sprintf("%d %s", h.Pid, h.Token))
	} else if cl.Kind == store.Grant {
		add("holder", "none (unbound)")
	}
	if cl.WallClock != 0 {
		add("wall clock", cl.WallClock.String()+", deadline "+at(cl.Deadline))
	}
	add("created", at(cl.CreatedAt))
	add("updated", at(cl.UpdatedAt))
	add("grace until", at(cl.GraceUntil))
	if v := cl.LastVerdict; v != nil {
		add("verdict", fmt.Sprintf("%s: %s (by %s), %s", v.Result, v.Reason, v.Mechanism, at(v.At)))
	}
	if r := cl.Release; r != nil {
		add("released", fmt.Sprintf("dead %v, escalated %v, root %s, %s", r.Dead, r.Escalated, r.Ownership, at(r.At)))
		for _, s := range r.Survivors {
			add("survivor", fmt.Sprintf("%d %s", s.Pid, s.Token))
		}
		for _, s := range r.Unproven {
			add("unproven", fmt.Sprintf("%d %s (%s)", s.Pid, s.Token, s.Reason))
		}
		add("incomplete", r.Incomplete)
	}
	if cl.ExitCode != nil || cl.ExitSignal != 0 {
		add("exit", exit(cl))
	}
	add("ended", at(cl.EndedAt))
	add("retired", cl.RetiredReason)
	add("output", cl.OutputPath)
	if cl.Kind == store.Job && (cl.State == store.Exited || cl.State == store.Retired) {
		add("followed up", strconv.FormatBool(cl.FollowedUp))
	}
	for _, l := range cl.Limits {
		add("limit", fmt.Sprintf("%s soft %s hard %s", l.Name, limit(l.Soft), limit(l.Hard)))
	}
	if cl.NoNewPrivs {
		add("no_new_privs", "true")
	}
	if s := cl.Started; s != nil {
		add("started with", Sanitize(fmt.Sprintf("umask %s, nice %d, %s, I/O %s, oom_score_adj %d, CPUs %s, %d seccomp filters",
			s.Umask, s.Nice, s.Policy, s.IOPrio, s.OOMScoreAdj, s.CPUs, s.SeccompFilters)))
	}
	add("members", strconv.Itoa(len(cl.Members)))
	for _, m := range cl.Members {
		add("  member", fmt.Sprintf("%d %s (parent %d, born %s)", m.Pid, m.Token, m.Parent, at(m.BornAt)))
	}
	table(w, rows)
}

func limit(v uint64) string {
	if v == ^uint64(0) {
		return "unlimited"
	}
	return strconv.FormatUint(v, 10)
}

// quoteArgv joins argv as a shell would need it typed: an argument with
// spaces or quotes is quoted.
func quoteArgv(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\"'\\$`") {
			a = strconv.Quote(a)
		}
		q[i] = a
	}
	return strings.Join(q, " ")
}

// Join joins words of a string type, as strings.Join does strings.
func Join[S ~string](words []S, sep string) string {
	s := make([]string, len(words))
	for i, w := range words {
		s[i] = string(w)
	}
	return strings.Join(s, sep)
}
