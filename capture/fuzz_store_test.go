package capture

import (
	"bytes"
	"encoding/binary"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/go-chi/chi/v5"
)

// FuzzDecodeSession: any bytes either fail to decode or decode to a record
// whose encoding is stable.
func FuzzDecodeSession(f *testing.F) {
	rec := &Session{ID: "s", Task: "t", State: StateReady, Calls: 3, NextSeq: 3, Cursors: []uint64{4, 5},
		Rewards: []Reward{{Value: 1, Source: "header"}}, Owner: "key:ab", ContinuedBy: "s.2", Latest: "s.2"}
	good, _ := encodeSession(rec)
	f.Add(good)
	f.Add([]byte(`{"v":1,"id":"x","state":"bogus","cursors":[18446744073709551615]}`))
	f.Add([]byte(`{"v":2}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, err := decodeSession(b)
		if err != nil {
			return
		}
		again, err := encodeSession(rec)
		if err != nil {
			return // e.g. a reward that decoded to a value JSON cannot hold
		}
		rec2, err := decodeSession(again)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if third, _ := encodeSession(rec2); !bytes.Equal(third, again) || rec2.ID != rec.ID || !reflect.DeepEqual(rec2.Cursors, rec.Cursors) && len(rec.Cursors) > 0 {
			t.Fatalf("encoding not stable:\n%s\n%s", again, third)
		}
	})
}

// FuzzStateKey: the session id of any index key is found without panic, and
// of a key made by stateKey it is the id put in.
func FuzzStateKey(f *testing.F) {
	f.Add([]byte("x\x00o\x00"), "sess", int64(1))
	f.Add([]byte{pState}, "", int64(-1))
	f.Add([]byte("x\x00r\x00\x00\x00\x00\x00\x00\x00\x01\x00abc"), "a\x00b", int64(1<<62))
	f.Fuzz(func(t *testing.T, raw []byte, id string, since int64) {
		_ = stateKeySession(raw)
		for _, st := range States {
			if got := stateKeySession(stateKey(st, since, id)); got != id {
				t.Fatalf("stateKeySession(stateKey(%s, %d, %q)) = %q", st, since, id, got)
			}
		}
	})
}

// FuzzWriterState loads the writer's state (cursor, ack watermark, state
// index and the session records it names) from arbitrary stored bytes: a
// damaged store makes Open fail with an error, never panic.
func FuzzWriterState(f *testing.F) {
	good, _ := encodeSession(&Session{ID: "s", State: StateOpen, Rewards: []Reward{{Value: 1}}})
	f.Add(uint64(3), []byte{0, 0, 0, 0, 0, 0, 0, 2}, byte('o'), "s", good)
	f.Add(uint64(0), []byte{1, 2, 3}, byte('c'), "s", []byte(`{"v":1,"id":"s","state":"committed"}`))
	f.Add(uint64(9), []byte(nil), byte('r'), "", []byte(`garbage`))
	f.Add(uint64(1), []byte{0, 0, 0, 0, 0, 0, 0, 0, 0}, byte('z'), "x\x00y", []byte(`{"v":1}`))
	f.Fuzz(func(t *testing.T, cursor uint64, acked []byte, state byte, id string, rec []byte) {
		db, err := badger.Open(badger.DefaultOptions("").WithInMemory(true).WithLogger(nil))
		if err != nil {
			t.Skip(err)
		}
		defer db.Close()
		err = db.Update(func(txn *badger.Txn) error {
			k := append([]byte{pState, sep, state, sep}, binary.BigEndian.AppendUint64(nil, uint64(time.Now().UnixNano()))...)
			k = append(append(k, sep), id...)
			for _, kv := range [][2][]byte{
				{metaKey("cursor"), binary.BigEndian.AppendUint64(nil, cursor)},
				{metaKey("acked"), acked},
				{k, nil},
				{sessionKey(id), rec},
			} {
				if err := txn.Set(kv[0], kv[1]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Skip(err)
		}
		o := DefaultOptions()
		_ = o.validate()
		m, _ := newMetrics(nil, func() float64 { return 0 })
		s := &Store{db: db, opts: o, m: m, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		if s.w, err = loadWriterState(s); err == nil {
			_ = s.recoverReady()
		}
	})
}

// FuzzAckBody: POST /v1/experiences/ack answers 200 or a 4xx for any body,
// never 500 or a panic.
func FuzzAckBody(f *testing.F) {
	s := openFuzzStore(f)
	r := chi.NewRouter()
	s.Routes(r)
	f.Add([]byte(`{"cursor":0}`))
	f.Add([]byte(`{"cursor":1}`))
	f.Add([]byte(`{"cursor":-1}`))
	f.Add([]byte(`{"cursor":18446744073709551616}`))
	f.Add([]byte(`{"cursor":"1"}`))
	f.Add([]byte(`{"cursor":null}`))
	f.Add([]byte(`[{"cursor":1}]`))
	f.Add([]byte(`{"cursor":1,"cursor":2}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/v1/experiences/ack", bytes.NewReader(body)))
		if w.Code != http.StatusOK && w.Code != http.StatusBadRequest {
			t.Fatalf("ack %q: %d %s", body, w.Code, w.Body.String())
		}
		if w.Code != http.StatusOK && !strings.Contains(w.Body.String(), `"error"`) {
			t.Fatalf("ack %q: error body %s", body, w.Body.String())
		}
	})
}

// FuzzExperiencesQuery: GET /v1/experiences answers 200 (NDJSON) or 400 for
// any query string; accepted parameters are in range.
func FuzzExperiencesQuery(f *testing.F) {
	s := openFuzzStore(f)
	r := chi.NewRouter()
	s.Routes(r)
	f.Add("after=0&limit=10")
	f.Add("after=18446744073709551615")
	f.Add("after=-1")
	f.Add("limit=0")
	f.Add("limit=10001&after=1")
	f.Add("after=1&after=2")
	f.Add("after=%zz")
	f.Add("limit=+5")
	f.Fuzz(func(t *testing.T, q string) {
		req, err := http.NewRequest(http.MethodGet, "/v1/experiences?"+q, nil)
		if err != nil {
			return
		}
		req.RequestURI = req.URL.RequestURI()
		if _, limit, err := pageParams(req); err == nil && (limit <= 0 || limit > 10000) {
			t.Fatalf("query %q: limit %d accepted", q, limit)
		}
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		if w.Code != http.StatusOK && w.Code != http.StatusBadRequest {
			t.Fatalf("query %q: %d %s", q, w.Code, w.Body.String())
		}
	})
}

// openFuzzStore opens a store with one ready experience.
func openFuzzStore(f *testing.F) *Store {
	f.Helper()
	s, err := Open(f.TempDir(), testOptions(), nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	v := newVocab()
	prompts, replies := toolSession()
	c := v.makeCall("f0", "fz", prompts[0], replies[0], 1)
	c.Hone.Reward, c.Hone.Commit = ptr(1), true
	done := make(chan error, 1)
	c.Durable = done
	s.Record(c)
	if err := <-done; err != nil {
		f.Fatal(err)
	}
	return s
}
