package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// keyCompact, in the meta bucket, marks a rewrite whose compaction has
// not yet been done: the rewrite commits it with the rewritten claims,
// the compacted file is written without it. A daemon killed between the
// two left the old bytes (the secrets a redaction pattern was added for)
// in freed pages for good, since the next start's rewrite changed
// nothing and so compacted nothing.
var keyCompact = []byte("compact_pending")

// rewrite applies fn (nil: none) to every claim in one transaction and
// writes back those it changes (Options.Rewrite: the daemon redacts the
// argv of claims stored before its patterns). A claim whose new form
// breaks the write limits is left as it was. When any claim changed, or
// an earlier rewrite's compaction is pending, the file is then compacted
// into a new one: bbolt never clears a page it frees, so the old bytes
// would otherwise stay in the file until the page is reused. It runs
// inside Open, before the store is shared.
func (s *Store) rewrite(opts Options, timeout time.Duration, fn func(*Claim) bool) error {
	pending := false
	if err := guard(func() error {
		return s.db.View(func(tx *bolt.Tx) error {
			if b := tx.Bucket(bucketMeta); b != nil && b.Get(keyCompact) != nil {
				pending = true
			}
			return nil
		})
	}); err != nil {
		return fmt.Errorf("read meta: %w", classify(err))
	}
	if fn == nil {
		if pending {
			return s.compact(opts, timeout)
		}
		return nil
	}
	changed, err := s.rewriteClaims(fn)
	if err != nil {
		return err
	}
	if changed == 0 && !pending {
		return nil
	}
	return s.compact(opts, timeout)
}

// rewriteClaims is rewrite's one transaction: the claims fn changes
// written back, with the mark of a compaction pending when any was.
func (s *Store) rewriteClaims(fn func(*Claim) bool) (changed int, err error) {
	err = guard(func() error {
		return s.db.Update(func(tx *bolt.Tx) error {
			claims, _, err := buckets(tx)
			if err != nil {
				return err
			}
			type record struct{ k, v []byte }
			var out []record
			err = claims.ForEach(func(k, v []byte) error {
				c, err := decodeClaim(k, v)
				if err != nil {
					return err
				}
				if !fn(&c) {
					return nil
				}
				nv, err := s.encode(&c)
				if err != nil {
					return nil // over a limit: kept as it was
				}
				out = append(out, record{append([]byte(nil), k...), nv})
				return nil
			})
			if err != nil {
				return err
			}
			for _, r := range out {
				if err := claims.Put(r.k, r.v); err != nil {
					return err
				}
			}
			if changed = len(out); changed > 0 {
				meta := tx.Bucket(bucketMeta)
				if meta == nil {
					return fmt.Errorf("no %q bucket: %w", bucketMeta, ErrCorrupt)
				}
				return meta.Put(keyCompact, []byte{1})
			}
			return nil
		})
	})
	if err != nil {
		return 0, fmt.Errorf("rewrite claims: %w", classify(err))
	}
	return changed, nil
}

// compactTemp is the name compact copies the store's file to: not
// create's, whose leftover says no store was made yet, as this one's says
// one was.
func compactTemp(path string) string { return path + ".compact" }

// compact copies the open data file into a new one under a temporary
// name (every commit synced), renames it into place, syncs the directory
// and opens it: a crash leaves the old file or the complete new one.
func (s *Store) compact(opts Options, timeout time.Duration) error {
	tmp := compactTemp(s.path)
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove leftover %s: %w", tmp, err)
	}
	dst, err := bolt.Open(tmp, 0o600, boltOptions(opts, timeout))
	if err != nil {
		return fmt.Errorf("compact into %s: %w", tmp, err)
	}
	err = bolt.Compact(dst, s.db, 0)
	if err == nil {
		// The copy is the compaction: it holds no mark of one pending.
		err = dst.Update(func(tx *bolt.Tx) error {
			if b := tx.Bucket(bucketMeta); b != nil {
				return b.Delete(keyCompact)
			}
			return nil
		})
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.db.Close()
		s.db = nil
	}
	if err == nil {
		err = os.Rename(tmp, s.path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(s.path))
	}
	if err != nil {
		os.Remove(tmp)
		if s.db == nil {
			if oerr := s.openFile(opts, timeout); oerr != nil {
				return fmt.Errorf("compact: %w; and reopening: %w", err, oerr)
			}
		}
		return fmt.Errorf("compact: %w", err)
	}
	return s.openFile(opts, timeout)
}
