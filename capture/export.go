package capture

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/parquet-go/parquet-go"
)

// Row kinds of an export.
const (
	KindTrajectory = "trajectory" // one row per trie leaf
	KindStep       = "step"       // one row per call (choice) on the trie
)

// Row is one exported sample. Column names and types follow verl's RL
// dataset conventions where they overlap: prompt (a list of {role, content}
// messages, what RLHFDataset hands to the chat template), responses,
// input_ids, attention_mask, loss_mask / response_mask, rewards.
type Row struct {
	Kind          string    `json:"kind" parquet:"kind"`
	Session       string    `json:"session" parquet:"session"`
	Task          string    `json:"task" parquet:"task"`
	Model         string    `json:"model" parquet:"model"`
	State         string    `json:"state" parquet:"state"`
	Created       time.Time `json:"created" parquet:"created,timestamp(millisecond)"`
	Leaf          int32     `json:"leaf" parquet:"leaf"`                     // trajectory rows: leaf index; step rows: -1
	Step          int32     `json:"step" parquet:"step"`                     // step rows: index on the path; trajectory rows: -1
	Call          string    `json:"call" parquet:"call"`                     // step rows: the call; trajectory rows: the last call
	PolicyVersion int64     `json:"policy_version" parquet:"policy_version"` // of the (last) call
	Prompt        []Message `json:"prompt" parquet:"prompt,list"`            // messages before the first completion
	Response      []Message `json:"response" parquet:"response,list"`        // messages from the first completion on
	Tools         string    `json:"tools" parquet:"tools"`                   // JSON tools of the last call, keys in the engine's order
	PromptIDs     []int32   `json:"prompt_ids" parquet:"prompt_ids,list"`
	Responses     []int32   `json:"responses" parquet:"responses,list"` // token ids after the prompt
	InputIDs      []int32   `json:"input_ids" parquet:"input_ids,list"` // prompt_ids + responses
	AttentionMask []int32   `json:"attention_mask" parquet:"attention_mask,list"`
	LossMask      []int32   `json:"loss_mask" parquet:"loss_mask,list"`         // over input_ids
	ResponseMask  []int32   `json:"response_mask" parquet:"response_mask,list"` // over responses
	OldLogProbs   []float32 `json:"old_log_probs" parquet:"old_log_probs,list"` // over responses, 0 where masked
	Versions      []int64   `json:"versions" parquet:"versions,list"`           // over responses
	Rewards       float64   `json:"rewards" parquet:"rewards"`                  // session reward (step rows: call reward if any)
	HasReward     bool      `json:"has_reward" parquet:"has_reward"`
	Drift         int32     `json:"drift" parquet:"drift"`
}

// ExportFilter selects sessions to export.
type ExportFilter struct {
	States       []State   // empty: every state
	Since, Until time.Time // on session creation; zero: unbounded
	Task         string    // only sessions of this task (uses the task index)
	Trajectories bool
	Steps        bool
}

func (f *ExportFilter) match(rec *Session) bool {
	if len(f.States) > 0 && !containsState(f.States, rec.State) {
		return false
	}
	if !f.Since.IsZero() && rec.Created.Before(f.Since) {
		return false
	}
	return f.Until.IsZero() || rec.Created.Before(f.Until)
}

func containsState(list []State, s State) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Sessions calls fn for every stored session matching f: by task index when
// f.Task is set, else by state index (oldest in state first) when f.States
// is, else in id order.
func (s *Store) Sessions(ctx context.Context, f ExportFilter, fn func(*Session) error) error {
	return s.db.View(func(txn *badger.Txn) error {
		visit := func(v []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			rec, err := decodeSession(v)
			if err != nil {
				return err
			}
			if f.match(rec) {
				return fn(rec)
			}
			return nil
		}
		switch {
		case f.Task != "":
			return s.indexedSessions(txn, append(key(pTask, f.Task), sep), visit)
		case len(f.States) > 0:
			for _, st := range f.States {
				if err := s.indexedSessions(txn, statePrefix(st), visit); err != nil {
					return err
				}
			}
			return nil
		}
		o := badger.DefaultIteratorOptions
		o.Prefix = []byte{pSession, sep}
		it := txn.NewIterator(o)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			if err := it.Item().Value(visit); err != nil {
				return fmt.Errorf("session %q: %w", it.Item().Key(), err)
			}
		}
		return nil
	})
}

// indexedSessions visits the session records named by the keys under an
// index prefix (task or state index: the session id ends the key).
func (s *Store) indexedSessions(txn *badger.Txn, prefix []byte, visit func([]byte) error) error {
	return iterKeys(txn, prefix, func(k []byte) error {
		id := string(k[bytes.LastIndexByte(k, sep)+1:])
		b, err := txnReader(txn)(sessionKey(id))
		if err != nil || b == nil {
			return err
		}
		if err := visit(b); err != nil {
			return fmt.Errorf("session %s: %w", id, err)
		}
		return nil
	})
}

// Export builds trajectory and step rows of the matching sessions from
// their stored calls, with current rewards.
func (s *Store) Export(ctx context.Context, f ExportFilter, fn func(*Row) error) error {
	rule := s.opts.Reward.Combine
	return s.Sessions(ctx, f, func(rec *Session) error {
		_, calls, err := s.GetSession(ctx, rec.ID)
		if err != nil {
			return err
		}
		tr, _ := buildTrie(calls)
		if f.Trajectories {
			for i, leaf := range tr.leaves() {
				if err := fn(trajectoryRow(rec, tr, leaf, i, rule)); err != nil {
					return err
				}
			}
		}
		if f.Steps {
			for i, n := range tr.nodes {
				if err := fn(stepRow(rec, tr, n, i, rule)); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

func baseRow(kind string, rec *Session, tr *trie, n *node, rule string) *Row {
	return &Row{Kind: kind, Session: rec.ID, Task: rec.Task, Model: rec.Model, State: string(rec.State),
		Created: rec.Created, Call: n.call.ID, PolicyVersion: n.call.Version,
		Rewards: rec.SessionReward(rule), HasReward: rec.rewarded(), Drift: int32(tr.drift)}
}

func trajectoryRow(rec *Session, tr *trie, leaf *node, i int, rule string) *Row {
	r := baseRow(KindTrajectory, rec, tr, leaf, rule)
	r.Leaf, r.Step = int32(i), -1
	tokens, mask, lps, vers, steps := trajectory(leaf, func(id string) *float64 { return rec.CallReward(rule, id) })
	split := steps[0].Start
	fillTokens(r, tokens, mask, lps, vers, split)
	r.Prompt, r.Response = splitMessages(callMessages(leaf.call, leaf.choice), firstCallMessages(leaf))
	r.Tools = engineTools(requestTools(leaf.call))
	return r
}

func stepRow(rec *Session, tr *trie, n *node, i int, rule string) *Row {
	r := baseRow(KindStep, rec, tr, n, rule)
	r.Leaf, r.Step = -1, int32(i)
	tokens, mask, lps, vers, steps := trajectory(n, func(string) *float64 { return nil })
	last := steps[len(steps)-1]
	// A step's prompt is everything before its completion, all masked out.
	for j := 0; j < last.Start; j++ {
		mask[j] = 0
	}
	fillTokens(r, tokens, mask, lps, vers, last.Start)
	if cr := rec.CallReward(rule, n.call.ID); cr != nil {
		r.Rewards, r.HasReward = *cr, true
	}
	r.Prompt, r.Response = splitMessages(callMessages(n.call, n.choice), gjsonLen(n.call.Request))
	r.Tools = engineTools(requestTools(n.call))
	return r
}

func fillTokens(r *Row, tokens []int32, mask []uint8, lps []float32, vers []int64, split int) {
	r.InputIDs = tokens
	r.PromptIDs = tokens[:split]
	r.Responses = tokens[split:]
	r.AttentionMask = make([]int32, len(tokens))
	r.LossMask = make([]int32, len(tokens))
	for i := range tokens {
		r.AttentionMask[i] = 1
		r.LossMask[i] = int32(mask[i])
	}
	r.ResponseMask = r.LossMask[split:]
	r.OldLogProbs = lps[split:]
	r.Versions = vers[split:]
}

// firstCallMessages is the number of request messages of the first call on
// a leaf's path: the trajectory's prompt.
func firstCallMessages(leaf *node) int {
	n := leaf
	for n.parent != nil && n.parent.parent != nil {
		n = n.parent
	}
	return gjsonLen(n.call.Request)
}

// splitMessages splits messages into the first n and the rest.
func splitMessages(msgs []Message, n int) ([]Message, []Message) {
	n = min(n, len(msgs))
	return msgs[:n:n], msgs[n:]
}

// RowWriter writes export rows in one format.
type RowWriter interface {
	Write(r *Row) error
	Close() error
}

// NewRowWriter returns a writer for format jsonl or parquet.
func NewRowWriter(w io.Writer, format string) (RowWriter, error) {
	switch format {
	case "jsonl":
		bw := bufio.NewWriterSize(w, 1<<20)
		return &jsonlWriter{bw: bw, enc: json.NewEncoder(bw)}, nil
	case "parquet":
		return &parquetWriter{w: parquet.NewGenericWriter[Row](w, parquet.Compression(&parquet.Zstd))}, nil
	}
	return nil, fmt.Errorf("export format %q: want jsonl or parquet", format)
}

type jsonlWriter struct {
	bw  *bufio.Writer
	enc *json.Encoder
}

func (j *jsonlWriter) Write(r *Row) error { return j.enc.Encode(r) }
func (j *jsonlWriter) Close() error       { return j.bw.Flush() }

// parquetWriter buffers rows and writes them in groups.
type parquetWriter struct {
	w   *parquet.GenericWriter[Row]
	buf []Row
}

func (p *parquetWriter) Write(r *Row) error {
	p.buf = append(p.buf, *r)
	if len(p.buf) < 1024 {
		return nil
	}
	return p.flush()
}

func (p *parquetWriter) flush() error {
	if _, err := p.w.Write(p.buf); err != nil {
		return fmt.Errorf("write parquet rows: %w", err)
	}
	p.buf = p.buf[:0]
	return nil
}

func (p *parquetWriter) Close() error {
	if err := p.flush(); err != nil {
		return err
	}
	return p.w.Close()
}
