package capture

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// written waits until the conversation writer has committed everything
// queued (without fsync).
func (c *Conversations) written(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for c.queued.Load() != 0 || len(c.q) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("conversations not written in 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

func convJSON(turns int) []byte {
	var b strings.Builder
	b.WriteString(`[{"role":"system","content":"You are a coding agent."}`)
	for i := range turns {
		fmt.Fprintf(&b, `,{"role":"user","content":"step %d: run the tests again and fix what fails"}`, i)
		fmt.Fprintf(&b, `,{"role":"assistant","content":"","tool_calls":[{"id":"call_%d","type":"function","function":{"name":"shell","arguments":"{\"cmd\":\"go test ./...\"}"}}]}`, i)
	}
	b.WriteString("]")
	return []byte(b.String())
}

func wantConv(t *testing.T, c *Conversations, owner, id string, want []byte) {
	t.Helper()
	got, ok, err := c.Conversation(owner, id)
	if err != nil || !ok || !bytes.Equal(got, want) {
		t.Fatalf("conversation %q of %q: ok %v err %v, %d bytes, want %d", id, owner, ok, err, len(got), len(want))
	}
}

func wantNoConv(t *testing.T, c *Conversations, owner, id string) {
	t.Helper()
	if got, ok, err := c.Conversation(owner, id); ok || err != nil {
		t.Fatalf("conversation %q of %q: found %v (%d bytes), err %v; want unknown", id, owner, ok, len(got), err)
	}
}

// TestConversationsPutGetOwnersRestart: a conversation is found by its
// owner only, from memory at once and from Badger by a fresh reader, large
// ones compressed, and after the store is closed and opened again.
func TestConversationsPutGetOwnersRestart(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, testOptions())
	c := s.Conversations(0, 0)
	if c.TTL() != time.Hour {
		t.Fatalf("default ttl %v", c.TTL())
	}
	small, large := convJSON(1), convJSON(200)
	for _, p := range []struct {
		owner, id string
		conv      []byte
	}{{"", "resp_small", small}, {"owner-a", "resp_large", large}, {"owner-b", "resp_b", small}} {
		if err := c.PutConversation(p.owner, p.id, p.conv); err != nil {
			t.Fatal(err)
		}
	}
	wantConv(t, c, "owner-a", "resp_large", large) // from memory, before the writer
	wantNoConv(t, c, "owner-b", "resp_large")      // another owner's id is unknown
	wantNoConv(t, c, "", "resp_large")
	wantNoConv(t, c, "owner-a", "resp_b")
	wantNoConv(t, c, "owner-a", "resp_nope")
	wantNoConv(t, c, "owner-a", "bad\x00id")
	if err := c.PutConversation("a", "bad\x00id", small); !errors.Is(err, ErrInvalid) {
		t.Fatalf("put of a NUL id: %v", err)
	}
	c.written(t)

	fresh := s.Conversations(0, 0) // nothing in its memory: Badger answers
	wantConv(t, fresh, "owner-a", "resp_large", large)
	wantConv(t, fresh, "", "resp_small", small)
	wantNoConv(t, fresh, "owner-b", "resp_large")
	err := s.db.View(func(txn *badger.Txn) error {
		for id, f := range map[string]byte{"resp_large": convFmtZstd, "resp_b": convFmtJSON} {
			owner := "owner-a"
			if id == "resp_b" {
				owner = "owner-b"
			}
			k, _ := convKey(owner, id)
			it, err := txn.Get(k)
			if err != nil {
				return err
			}
			v, _ := it.ValueCopy(nil)
			if v[0] != f || f == convFmtZstd && len(v) > len(large)/4 {
				return fmt.Errorf("%s stored as %q, %d bytes (conversation %d)", id, v[0], len(v), len(large))
			}
			if exp := time.Unix(int64(it.ExpiresAt()), 0); time.Until(exp) < 59*time.Minute || time.Until(exp) > time.Hour {
				return fmt.Errorf("%s expires at %v, want in 1h", id, exp)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.PutConversation("owner-a", "resp_late", small); !errors.Is(err, ErrClosed) {
		t.Fatalf("put on a closed store: %v", err)
	}
	if _, _, err := fresh.Conversation("owner-a", "resp_nope"); !errors.Is(err, ErrClosed) {
		t.Fatalf("read on a closed store: %v", err)
	}
	s = openTest(t, dir, testOptions())
	defer s.Close()
	c = s.Conversations(0, 0)
	wantConv(t, c, "owner-a", "resp_large", large)
	wantConv(t, c, "", "resp_small", small)
	wantConv(t, c, "owner-b", "resp_b", small)
	wantNoConv(t, c, "owner-a", "resp_b")
}

// TestConversationsCloseWritesQueued: Close returns only once every
// conversation put before it is committed: a graceful restart loses none.
func TestConversationsCloseWritesQueued(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, testOptions())
	c := s.Conversations(0, 0)
	conv := convJSON(20)
	const n = 3000 // more than the queue holds: the writer is still busy at Close
	var kept []int
	for i := range n {
		before := c.dropped.Load()
		if err := c.PutConversation("o", fmt.Sprintf("resp_%d", i), conv); err != nil {
			t.Fatal(err)
		}
		if c.dropped.Load() == before {
			kept = append(kept, i)
		}
	}
	if err := s.Close(); err != nil { // no wait for the writer
		t.Fatal(err)
	}
	s = openTest(t, dir, testOptions())
	defer s.Close()
	c = s.Conversations(0, 0)
	for _, i := range kept {
		wantConv(t, c, "o", fmt.Sprintf("resp_%d", i), conv)
	}
	if len(kept) < convQueue {
		t.Fatalf("only %d of %d conversations queued", len(kept), n)
	}
	t.Logf("%d of %d conversations queued, all found after Close and Open", len(kept), n)
}

// TestConversationsTTL: conversations expire by Badger's TTL (whole
// seconds), in memory and on disk; retention.call_ttl caps the TTL.
func TestConversationsTTL(t *testing.T) {
	s := openTest(t, t.TempDir(), testOptions())
	defer s.Close()
	c := s.Conversations(time.Second, 0)
	conv := convJSON(3)
	if err := c.PutConversation("o", "resp_short", conv); err != nil {
		t.Fatal(err)
	}
	c.written(t)
	fresh := s.Conversations(time.Second, 0)
	wantConv(t, fresh, "o", "resp_short", conv) // from Badger, TTL not yet reached
	time.Sleep(2 * time.Second)
	wantNoConv(t, c, "o", "resp_short")     // its memory copy
	wantNoConv(t, fresh, "o", "resp_short") // the copy fresh read back
	wantNoConv(t, s.Conversations(time.Second, 0), "o", "resp_short")

	o := testOptions()
	o.Session.IdleTimeout, o.Reward.Deadline, o.Retention.CallTTL = time.Minute, time.Minute, 13*time.Minute
	s2 := openTest(t, t.TempDir(), o)
	defer s2.Close()
	if ttl := s2.Conversations(time.Hour, 0).TTL(); ttl != 13*time.Minute {
		t.Fatalf("ttl %v with retention.call_ttl 13m, want 13m", ttl)
	}
	c2 := s2.Conversations(5*time.Minute, 0)
	if c2.TTL() != 5*time.Minute {
		t.Fatalf("ttl %v, want 5m (below call_ttl)", c2.TTL())
	}
	if err := c2.PutConversation("o", "resp_x", conv); err != nil {
		t.Fatal(err)
	}
	c2.written(t)
	err := s2.db.View(func(txn *badger.Txn) error {
		k, _ := convKey("o", "resp_x")
		it, err := txn.Get(k)
		if err != nil {
			return err
		}
		if d := time.Until(time.Unix(int64(it.ExpiresAt()), 0)); d < 4*time.Minute || d > 5*time.Minute {
			return fmt.Errorf("expires in %v, want 5m", d)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestConversationsCacheBounded: the memory copies stay within their
// entries and bytes; what left memory is read back from Badger.
func TestConversationsCacheBounded(t *testing.T) {
	s := openTest(t, t.TempDir(), testOptions())
	defer s.Close()
	c := s.Conversations(0, 8)
	c.maxBytes = 64 << 10
	conv := convJSON(100) // ~14 KB
	for i := range 50 {
		if err := c.PutConversation("o", fmt.Sprintf("resp_%d", i), conv); err != nil {
			t.Fatal(err)
		}
	}
	c.written(t)
	c.mu.Lock()
	n, b := c.cache.Len(), c.cacheBytes
	c.mu.Unlock()
	if n > 8 || b > c.maxBytes || b != int64(n*len(conv)) {
		t.Fatalf("cache holds %d entries, %d bytes", n, b)
	}
	for i := range 50 {
		wantConv(t, c, "o", fmt.Sprintf("resp_%d", i), conv)
	}
}
