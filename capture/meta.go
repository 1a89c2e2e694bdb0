package capture

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/dgraph-io/badger/v4"
)

// Named records beside the traces, for state other parts of hone keep with
// the store (a rollout's state): one Badger key per name, under the meta
// prefix with a "x/" namespace so they never meet the store's own.

func extKey(name string) []byte { return metaKey("x/" + name) }

// PutMeta stores value under name durably (synced before it returns),
// ordered with the writer's other work.
func (s *Store) PutMeta(name string, value []byte) error {
	v := append([]byte(nil), value...)
	return s.do(context.Background(), func() error {
		return s.update(true, func(t *tx) error {
			if err := t.w.SetEntry(badger.NewEntry(extKey(name), v)); err != nil {
				return fmt.Errorf("write %s: %w", name, err)
			}
			return nil
		})
	})
}

// MetaPrefix returns the records whose names start with prefix.
func (s *Store) MetaPrefix(prefix string) (map[string][]byte, error) {
	out := map[string][]byte{}
	p := extKey(prefix)
	err := s.db.View(func(txn *badger.Txn) error {
		o := badger.DefaultIteratorOptions
		o.Prefix = p
		it := txn.NewIterator(o)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			out[string(bytes.TrimPrefix(k, extKey("")))] = v
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %s*: %w", prefix, err)
	}
	return out, nil
}

// ReadySession is a session that became ready (committed and rewarded)
// for the first time: what a rollout counts.
type ReadySession struct {
	ID     string
	Model  string  // the model name its first call asked for
	Reward float64 // the combined session reward
	// Versions are the distinct policy versions that generated its tokens.
	Versions []int64
}

// readyHookQueue bounds the ready sessions waiting for the hooks.
const readyHookQueue = 1 << 14

// OnReady registers fn for each session that becomes ready for the first
// time (not for rebuilds). Hooks run in order on one goroutine of their
// own, never on the writer's, so they may call back into the store. Call
// it before traffic starts.
func (s *Store) OnReady(fn func(ReadySession)) {
	s.hookMu.Lock()
	defer s.hookMu.Unlock()
	if s.readyCh == nil {
		s.readyCh = make(chan ReadySession, readyHookQueue)
		go s.runReadyHooks()
	}
	s.readyHooks = append(s.readyHooks, fn)
}

func (s *Store) runReadyHooks() {
	for rs := range s.readyCh {
		s.hookMu.Lock()
		hooks := s.readyHooks
		s.hookMu.Unlock()
		for _, fn := range hooks {
			fn(rs)
		}
	}
}

// notifyReady queues rec's first readiness for the hooks, once the
// transaction that made it ready commits.
func (t *tx) notifyReady(rec *Session, exps []Experience) {
	ch := t.s.readyCh
	if ch == nil {
		return
	}
	var versions []int64
	for i := range exps {
		for j, m := range exps[i].Mask {
			if m == 1 && !slices.Contains(versions, exps[i].Versions[j]) {
				versions = append(versions, exps[i].Versions[j])
			}
		}
	}
	rs := ReadySession{ID: rec.ID, Model: rec.Model, Reward: rec.SessionReward(t.s.opts.Reward.Combine), Versions: versions}
	t.after = append(t.after, func() {
		select {
		case ch <- rs:
		default:
			t.s.log.Warn("ready-session hooks behind: a session is not counted by them", "session", rs.ID)
		}
	})
}
