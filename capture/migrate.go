package capture

import (
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// stateIndexVersion is the layout of the state index this code writes.
const stateIndexVersion = 2

// migrateStateIndex moves a store written before state index version 2 to
// it: there, committed and consumed sessions were indexed under the same
// byte ('c'), so gc and eviction, which take consumed sessions, also took
// committed ones still waiting for their reward. Each 'c' entry is checked
// against its session record and consumed ones move to their own byte.
func (s *Store) migrateStateIndex() error {
	var version uint64
	err := s.db.View(func(txn *badger.Txn) error {
		var err error
		version, err = readUint(txnReader(txn), metaKey("state-index"))
		return err
	})
	if err != nil || version >= stateIndexVersion {
		return err
	}
	wb := s.db.NewWriteBatch()
	defer wb.Cancel()
	moved := 0
	err = s.db.View(func(txn *badger.Txn) error {
		read := txnReader(txn)
		return iterKeys(txn, statePrefix(StateCommitted), func(k []byte) error {
			id := stateKeySession(k)
			b, err := read(sessionKey(id))
			if err != nil || b == nil {
				return err
			}
			rec, err := decodeSession(b)
			if err != nil {
				return fmt.Errorf("migrate state index: session %s: %w", id, err)
			}
			if rec.State != StateConsumed {
				return nil
			}
			moved++
			if err := wb.Delete(k); err != nil {
				return err
			}
			return wb.Set(stateKey(StateConsumed, rec.Since.UnixNano(), id), nil)
		})
	})
	if err == nil {
		err = wb.Set(metaKey("state-index"), uint64Bytes(stateIndexVersion))
	}
	if err == nil {
		err = wb.Flush()
	}
	if err != nil {
		return errors.Join(errors.New("migrate state index"), err)
	}
	if moved > 0 {
		s.log.Info("state index migrated: consumed sessions no longer share committed's key", "moved", moved)
	}
	return nil
}
