// Package store keeps the supervisor daemon's claims (grants and jobs) in a
// bbolt file, so that a restarted daemon can reconcile every process it held
// before.
//
// The mechanism: one bbolt file, written only in fsync'ed transactions
// (NoSync and NoFreelistSync are off), with three buckets: "meta" (the
// schema version, as decimal text under "schema_version"), "claims" (one
// JSON value per claim, keyed by its ID) and "members" (one JSON value per
// observed descendant, keyed by claim ID, zero-padded pid and token, so
// that recording a fork rewrites neither the claim nor its other members).
// Every exported operation is a single transaction: after a crash, a kill -9
// or a power cut, the file holds exactly the transactions that returned.
//
// A store that cannot be read is an error, never an empty store: the daemon
// must not reap anything on account of a claim it failed to read. Open
// therefore checks the file before bbolt maps it. A pure-Go walk of the
// file (meta pages, freelist, every branch and leaf page, inline buckets)
// refuses anything bbolt would misread or fault on (bbolt trusts page ids
// and offsets, so a truncated or bit-flipped file can crash the process),
// and then every record is decoded. Any failure is ErrCorrupt, the file is
// left byte for byte as it was, and it is never recreated: an operator
// moves it aside. Nor is a missing file recreated while its lock file, or
// an entry of Options.Evidence, says a store was there (ErrMissing): an
// operator puts it back, or removes those to start afresh. A new store is built under a temporary name and renamed
// into place, so an empty or half-initialised file at the path is corrupt,
// not new. Open can rewrite claims (Options.Rewrite: the daemon's argument
// redaction of claims stored before its patterns) and then compacts the
// file into a new one the same way, since bbolt never clears a freed page.
//
// One daemon at a time: Open takes an exclusive flock on "<path>.lock"
// (which also records the holder's pid) and bbolt's own flock on the data
// file, both with a timeout, and fails with ErrLocked. Locks are advisory:
// a program that ignores them (a bbolt CLI run with a write command) can
// still damage the file.
//
// Limits: every write is bounded (see Limits) and fails with ErrTooLarge,
// so a client cannot bloat the file through the daemon; the file itself is
// capped by Options.MaxFileSize. Strings must be valid UTF-8 (JSON would
// otherwise rewrite them silently): an argv read from a process that holds
// other bytes must be made valid by the caller (strings.ToValidUTF8).
// Records are JSON without HTML escaping ('<' is one byte, as it was
// not before: older records, escaped, read the same); RecordSize measures
// one, for a caller that must leave room in MaxRecord for its later
// writes. Claims are few (thousands), so List scans; there are no indexes.
package store
