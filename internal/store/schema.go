package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"

	"github.com/procsupervisor/supervisor/internal/jsonx"
	"github.com/procsupervisor/supervisor/internal/token"
)

// SchemaVersion is the layout this package reads and writes.
const SchemaVersion = len(migrations)

var (
	bucketMeta    = []byte("meta")
	bucketClaims  = []byte("claims")
	bucketMembers = []byte("members")
	keyVersion    = []byte("schema_version")
)

// migrations[i] turns a store of schema version i into version i+1, inside
// the transaction that then records the new version. Version 0 is a new,
// empty file. A migration must decode old records strictly and fail on
// anything it cannot read: the transaction then rolls back and the file is
// left as it was.
var migrations = [...]func(*bolt.Tx) error{
	0: func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketMeta, bucketClaims, bucketMembers} {
			if _, err := tx.CreateBucket(name); err != nil {
				return fmt.Errorf("create bucket %s: %w", name, err)
			}
		}
		return nil
	},
}

// readVersion returns the schema version recorded in tx.
func readVersion(tx *bolt.Tx) (int, error) {
	b := tx.Bucket(bucketMeta)
	if b == nil {
		return 0, fmt.Errorf("no %q bucket, not a supervisor store: %w", bucketMeta, ErrCorrupt)
	}
	raw := b.Get(keyVersion)
	v, err := strconv.Atoi(string(raw))
	if err != nil || v < 1 {
		return 0, fmt.Errorf("schema version %q: %w", raw, ErrCorrupt)
	}
	return v, nil
}

// migrate brings tx from version from to SchemaVersion.
func migrate(tx *bolt.Tx, from int) error {
	for v := from; v < SchemaVersion; v++ {
		if err := migrations[v](tx); err != nil {
			return fmt.Errorf("migrate schema %d to %d: %w", v, v+1, err)
		}
	}
	b := tx.Bucket(bucketMeta)
	if b == nil {
		return fmt.Errorf("no %q bucket after migration: %w", bucketMeta, ErrCorrupt)
	}
	return b.Put(keyVersion, []byte(strconv.Itoa(SchemaVersion)))
}

// decodeStrict decodes exactly one JSON value with no unknown fields. The
// bound is bbolt's on a value: writes are held to Limits.MaxRecord, which
// this function cannot see, and a record that was written is read back.
func decodeStrict(val []byte, v any) error {
	// JSON decoding would turn bytes that are not UTF-8 into U+FFFD
	// without a word; the store never writes them (marshal does
	// not), so a record holding them was changed behind its back.
	if !utf8.Valid(val) {
		return errors.New("not valid UTF-8")
	}
	return jsonx.Decode(val, bolt.MaxValueSize, v)
}

// decodeClaim decodes the claim stored under key. Errors wrap ErrCorrupt.
func decodeClaim(key, val []byte) (Claim, error) {
	var c Claim
	if err := decodeStrict(val, &c); err != nil {
		return Claim{}, fmt.Errorf("claim %q: %v: %w", key, err, ErrCorrupt)
	}
	switch {
	case c.ID != string(key):
		return Claim{}, fmt.Errorf("claim %q holds id %q: %w", key, c.ID, ErrCorrupt)
	case !c.Kind.valid(), !ValidID(c.Kind, c.ID):
		return Claim{}, fmt.Errorf("claim %q: kind %q: %w", key, c.Kind, ErrCorrupt)
	case !c.State.valid():
		return Claim{}, fmt.Errorf("claim %q: state %q: %w", key, c.State, ErrCorrupt)
	}
	return c, nil
}

func encodeClaim(c *Claim) ([]byte, error) { return marshal(c) }

// marshal is json.Marshal without its HTML escaping: '<', '>' and '&'
// are stored as themselves, not as six-byte \u003c sequences that made an
// argv of 32 KiB of them a record of 192 KiB. Records written escaped
// (before) decode to the same strings.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// RecordSize returns the size of c's claim record as Put or Update would
// write it (members excluded), which Limits.MaxRecord bounds. It does not
// check c against the other limits. A caller that will write the claim
// again later can measure c as it will then be, to refuse at its creation
// a claim whose later writes would not fit.
func RecordSize(c *Claim) (int, error) {
	v, err := encodeClaim(c)
	if err != nil {
		return 0, fmt.Errorf("encode: %v: %w", err, ErrInvalid)
	}
	return len(v), nil
}

// memberKey is the claim id, "/", the pid in ten digits, "/", the token:
// members sort by pid within their claim and (pid, token) is unique.
func memberKey(id string, pid int32, tok token.Token) []byte {
	k := make([]byte, 0, len(id)+12+80)
	k = append(k, id...)
	k = append(k, '/')
	p := strconv.AppendInt(nil, int64(pid), 10)
	for range 10 - len(p) {
		k = append(k, '0')
	}
	k = append(k, p...)
	k = append(k, '/')
	return tok.Append(k)
}

func memberPrefix(id string) []byte { return append([]byte(id), '/') }

// decodeMember decodes the member stored under key and returns the id of
// its claim. Errors wrap ErrCorrupt.
func decodeMember(key, val []byte) (string, Member, error) {
	var m Member
	if err := decodeStrict(val, &m); err != nil {
		return "", Member{}, fmt.Errorf("member %q: %v: %w", key, err, ErrCorrupt)
	}
	if len(key) < idLen || kindOf(string(key[:idLen])) == "" {
		return "", Member{}, fmt.Errorf("member %q: no claim id: %w", key, ErrCorrupt)
	}
	id := string(key[:idLen])
	if m.Pid <= 0 || !bytes.Equal(memberKey(id, m.Pid, m.Token), key) {
		return "", Member{}, fmt.Errorf("member %q holds pid %d token %q: %w", key, m.Pid, m.Token, ErrCorrupt)
	}
	return id, m, nil
}

// checkRecords decodes every record in tx: a store whose records do not
// all decode is corrupt as a whole.
func checkRecords(tx *bolt.Tx) error {
	claims, members := tx.Bucket(bucketClaims), tx.Bucket(bucketMembers)
	if claims == nil || members == nil {
		return fmt.Errorf("missing claims or members bucket: %w", ErrCorrupt)
	}
	err := claims.ForEach(func(k, v []byte) error {
		if v == nil {
			return fmt.Errorf("nested bucket %q among claims: %w", k, ErrCorrupt)
		}
		_, err := decodeClaim(k, v)
		return err
	})
	if err != nil {
		return err
	}
	return members.ForEach(func(k, v []byte) error {
		if v == nil {
			return fmt.Errorf("nested bucket %q among members: %w", k, ErrCorrupt)
		}
		id, _, err := decodeMember(k, v)
		if err != nil {
			return err
		}
		if claims.Get([]byte(id)) == nil {
			return fmt.Errorf("member %q of a claim that does not exist: %w", k, ErrCorrupt)
		}
		return nil
	})
}
