package cmddoc

// Supervisor is what the supervisor's man page says besides its commands.
var Supervisor = Page{
	Name:    "supervisor",
	Section: "1",
	Summary: "knows, with proof, which processes on a host are its own",
	Description: `supervisor keys every process by (pid, start token), watches fork, exec
and exit as they happen (eBPF, the netlink proc connector, or polling),
judges every claim OWNED, FOREIGN, GONE or UNVERIFIABLE with a reason, and
signals only through a pidfd bound to a process it has proven to be the one
it recorded.

The daemon (supervisor run) holds claims: grants (a contained process tree,
optionally bound to the process that asked) and jobs (detached, their exit
code and output kept). The other commands ask it over its Unix socket, or,
for token, verify, kill, events and tree, work on this host without it.

A quick start, as root:

    supervisor run &
    supervisor launch --owner demo sleep 600
    supervisor list
    supervisor show ID
    supervisor release ID`,
	Environment: `SUPERVISOR_SOCKET names the daemon's socket when --socket is not given.`,
	Files: `The daemon's API socket and state directory are the defaults of its
--socket and --state-dir flags (see run above); a client finds the socket
the same way, unless SUPERVISOR_SOCKET or --socket names another.`,
	Exit: `Each command documents its own codes above. In general: 0 done; 1, 2, 3 a
verdict or a teardown's outcome; 64 bad arguments; 65 a malformed token;
66 no such process or claim; 69 the daemon or a mechanism is unavailable;
70 another error; 77 refused.`,
	SeeAlso: []string{"systemd.service(5)", "pidfd_open(2)", "proc(5)"},
}
