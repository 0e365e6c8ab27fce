// Package userns says whose share of the daemon a process draws on: its
// uid, or, for a process in a user namespace that a user other than root
// created, that user's uid.
//
// A user with a subordinate uid range (/etc/subuid: 65,536 uids by
// useradd's default, what rootless containers use) can run processes as
// any of those uids, and each would count as a user of its own: every
// per-uid share of the daemon (connections, request rate, long-lived
// requests, claim and byte quotas, descriptors) multiplied by the range.
// The kernel records who created each user namespace, so the account of a
// process is the owner of the outermost user namespace below the daemon's
// that holds it, unless that owner is root: namespaces root made (a
// container manager's) hold users root chose to keep apart.
//
// The account is for fairness only. What a process may do (whose claims it
// may act on, with whose rights a signal is sent) stays its uid's.
//
// A subordinate uid can also run outside its user's namespaces: a workload
// the daemon started for a client in one runs as that uid in the daemon's
// own. SubordinateOf attributes any uid in a user's /etc/subuid range to
// that user (ranges root holds excepted, as namespaces root made are).
//
// Mechanism (Linux): the peer's pidfd (SO_PEERPIDFD) gives its user
// namespace (PIDFD_GET_USER_NAMESPACE, Linux 6.11; before that,
// /proc/PID/ns/user, confirmed by the pidfd afterwards); NS_GET_PARENT walks
// up to the daemon's own namespace and NS_GET_OWNER_UID reads the owner.
// Elsewhere the account is the uid.
package userns
