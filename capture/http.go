package capture

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/hone-rl/hone/internal/jsonerr"
)

// maxBody bounds control-plane request bodies.
const maxBody = 1 << 20

// Routes mounts the control-plane routes; the caller adds authentication.
func (s *Store) Routes(r chi.Router) {
	r.Post("/v1/feedback", s.handleFeedback)
	r.Post("/v1/commit", s.handleCommit)
	r.Post("/feedback", s.handleTrinityFeedback)
	r.Post("/commit", s.handleTrinityCommit)
	r.Get("/v1/sessions", s.handleSessions)
	r.Get("/v1/sessions/*", s.handleSession) // a session id may hold "/" (sent escaped or not)
	r.Get("/v1/experiences", s.handleExperiences)
	r.Post("/v1/experiences/ack", s.handleAck)
}

type apiError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}

// writeError answers with an OpenAI-style error body.
func writeError(w http.ResponseWriter, err error) {
	status, typ, code := http.StatusInternalServerError, "server_error", "internal_error"
	switch {
	case errors.Is(err, ErrNotFound):
		status, typ, code = http.StatusNotFound, "not_found_error", "not_found"
	case errors.Is(err, ErrInvalid):
		status, typ, code = http.StatusBadRequest, "invalid_request_error", "invalid_body"
	case errors.Is(err, ErrForbidden):
		status, typ, code = http.StatusForbidden, "permission_error", "forbidden"
	case errors.Is(err, ErrClosed):
		status, typ, code = http.StatusServiceUnavailable, "server_error", "store_closed"
	}
	if status == http.StatusInternalServerError {
		slog.Error("capture control plane", "err", err)
	}
	e := apiError{Message: err.Error(), Type: typ, Code: code}
	var fe *fieldError
	if errors.As(err, &fe) {
		e.Param = &fe.field
	}
	writeJSON(w, status, map[string]apiError{"error": e})
}

// fieldError is a body field at fault: the error names the field in its
// message and in OpenAI's "param".
type fieldError struct{ field, msg string }

func (e *fieldError) Error() string { return e.msg }

func (e *fieldError) Unwrap() error { return ErrInvalid }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// decodeBody reads a JSON body into v; an empty body is allowed when
// allowEmpty is set.
func decodeBody(w http.ResponseWriter, r *http.Request, v any, allowEmpty bool) error {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if me := (*http.MaxBytesError)(nil); errors.As(err, &me) {
		msg, _ := jsonerr.Describe(err) // the body's size, in the words the other routes use
		return fmt.Errorf("%s: %w", msg, ErrInvalid)
	}
	if err != nil {
		return fmt.Errorf("read body: %v: %w", err, ErrInvalid)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		if allowEmpty {
			return nil
		}
		return fmt.Errorf("empty body: %w", ErrInvalid)
	}
	if err := json.Unmarshal(b, v); err != nil {
		msg, field := jsonerr.Describe(err)
		if field != "" {
			return &fieldError{field: field, msg: msg}
		}
		return fmt.Errorf("%s: %w", msg, ErrInvalid)
	}
	return nil
}

type sessionReply struct {
	Session string  `json:"session"`
	State   State   `json:"state"`
	Reward  float64 `json:"reward"`
}

func (s *Store) sessionReply(rec *Session) sessionReply {
	return sessionReply{Session: rec.ID, State: rec.State, Reward: rec.SessionReward(s.opts.Reward.Combine)}
}

func (s *Store) handleFeedback(w http.ResponseWriter, r *http.Request) {
	var req FeedbackReq
	if err := decodeBody(w, r, &req, false); err != nil {
		writeError(w, err)
		return
	}
	rec, err := s.Feedback(r.Context(), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.sessionReply(rec))
}

func (s *Store) handleCommit(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Session string `json:"session"`
	}
	if err := decodeBody(w, r, &req, false); err != nil {
		writeError(w, err)
		return
	}
	rec, err := s.Commit(r.Context(), req.Session)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.sessionReply(rec))
}

// maxMsgIDs bounds the response ids of one Trinity feedback (each is looked
// up on the capture writer): a task's trajectory names tens.
const maxMsgIDs = 1024

// TrinityFeedbackReq is Trinity-RFT's feedback body. task_id and run_id may
// be numbers, strings or null; msg_ids are the response ids the agent saw.
type TrinityFeedbackReq struct {
	MsgIDs []json.RawMessage `json:"msg_ids"`
	Reward *float64          `json:"reward"`
	TaskID json.RawMessage   `json:"task_id"`
	RunID  json.RawMessage   `json:"run_id"`
}

// parse validates the body and returns its fields as strings.
func (q *TrinityFeedbackReq) parse() (ids []string, reward float64, task, run string, err error) {
	if q.Reward == nil {
		return nil, 0, "", "", fmt.Errorf("reward is required: %w", ErrInvalid)
	}
	if len(q.MsgIDs) > maxMsgIDs {
		return nil, 0, "", "", fmt.Errorf("msg_ids: %d ids, at most %d in one feedback: %w", len(q.MsgIDs), maxMsgIDs, ErrInvalid)
	}
	for _, m := range q.MsgIDs {
		id, err := scalarString(m)
		if err != nil || id == "" {
			return nil, 0, "", "", fmt.Errorf("msg_ids: %s is not an id: %w", truncate(string(m), 32), ErrInvalid)
		}
		ids = append(ids, id)
	}
	if task, err = scalarString(q.TaskID); err == nil {
		task, err = ParseID(task)
	}
	if err != nil {
		return nil, 0, "", "", fmt.Errorf("task_id: %v: %w", err, ErrInvalid)
	}
	if run, err = scalarString(q.RunID); err == nil {
		run, err = ParseID(run)
	}
	if err != nil {
		return nil, 0, "", "", fmt.Errorf("run_id: %v: %w", err, ErrInvalid)
	}
	return ids, *q.Reward, task, run, nil
}

// scalarString renders a JSON string or number as a string; null is "".
func scalarString(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	switch raw[0] {
	case '"':
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		var n json.Number
		if err := json.Unmarshal(raw, &n); err != nil {
			return "", err
		}
		return n.String(), nil
	}
	return "", fmt.Errorf("want string or number, got %s", truncate(string(raw), 32))
}

func (s *Store) handleTrinityFeedback(w http.ResponseWriter, r *http.Request) {
	var req TrinityFeedbackReq
	if err := decodeBody(w, r, &req, false); err != nil {
		writeError(w, err)
		return
	}
	ids, reward, task, run, err := req.parse()
	if err != nil {
		writeError(w, err)
		return
	}
	sessions, err := s.TrinityFeedback(r.Context(), ids, reward, task, run)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "success", "sessions": sessions})
}

func (s *Store) handleTrinityCommit(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, maxBody))
	sessions, err := s.TrinityCommit(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	if sessions == nil {
		sessions = []string{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "success", "committed": sessions})
}

// CallView summarises one call of a session.
type CallView struct {
	ID               string    `json:"id"`
	Seq              uint64    `json:"seq"`
	Route            string    `json:"route"`
	Model            string    `json:"model"`
	PolicyVersion    int64     `json:"policy_version"`
	ResponseID       string    `json:"response_id,omitempty"`
	Status           Status    `json:"status"`
	Start            time.Time `json:"start"`
	LatencyMS        float64   `json:"latency_ms"`
	PromptTokens     int       `json:"prompt_tokens"`
	CompletionTokens int       `json:"completion_tokens"`
	MeanLogprob      *float64  `json:"mean_logprob,omitempty"`
	FinishReason     string    `json:"finish_reason,omitempty"`
	Reward           *float64  `json:"reward,omitempty"`
	// Drift is the cause when the call extended no earlier path of its
	// session (see the session's drifts for the message).
	Drift string `json:"drift,omitempty"`
}

// SessionView is the GET /v1/sessions/{id} body.
type SessionView struct {
	*Session
	Reward    float64    `json:"reward"`
	CallViews []CallView `json:"calls_detail"`
}

// ViewCall summarises a call; rec gives call-level rewards (may be nil).
func ViewCall(c *Call, rec *Session, rule string) CallView {
	v := CallView{ID: c.ID, Seq: c.Seq, Route: c.Route, Model: c.Model, PolicyVersion: c.Version,
		ResponseID: c.ResponseID, Status: c.Status, Start: c.Start,
		LatencyMS: float64(c.Latency) / float64(time.Millisecond), PromptTokens: len(c.PromptIDs)}
	var sum float64
	var n int
	for i := range c.Choices {
		ch := &c.Choices[i]
		v.CompletionTokens += len(ch.TokenIDs)
		if v.PromptTokens == 0 {
			v.PromptTokens = len(ch.PromptIDs)
		}
		if v.FinishReason == "" {
			v.FinishReason = ch.FinishReason
		}
		for _, lp := range ch.Logprobs {
			sum += float64(lp)
			n++
		}
	}
	if n > 0 {
		m := sum / float64(n)
		v.MeanLogprob = &m
	}
	if rec != nil {
		v.Reward = rec.CallReward(rule, c.ID)
	}
	return v
}

func (s *Store) handleSession(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "*")
	if r.URL.RawPath != "" { // chi routes on the escaped path when there is one
		var err error
		if id, err = url.PathUnescape(id); err != nil {
			writeError(w, fmt.Errorf("session id %q: %v: %w", chi.URLParam(r, "*"), err, ErrInvalid))
			return
		}
	}
	if id == "" {
		writeError(w, fmt.Errorf("GET /v1/sessions/{id} needs a session id: %w", ErrInvalid))
		return
	}
	rec, calls, err := s.GetSession(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return
	}
	if len(calls) >= rec.Calls {
		rec.Drifts = SessionDrifts(calls)
		rec.Drift = len(rec.Drifts)
	}
	causes := map[string]string{}
	for _, d := range rec.Drifts {
		causes[d.Call] = d.Cause
	}
	v := SessionView{Session: rec, Reward: rec.SessionReward(s.opts.Reward.Combine), CallViews: []CallView{}}
	for _, c := range calls {
		cv := ViewCall(c, rec, s.opts.Reward.Combine)
		cv.Drift = causes[c.ID]
		v.CallViews = append(v.CallViews, cv)
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Store) handleExperiences(w http.ResponseWriter, r *http.Request) {
	after, limit, err := pageParams(r)
	if err == nil && !r.URL.Query().Has("after") {
		_, after, err = s.Cursor(r.Context()) // resume after the acknowledged ones
	}
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	rc := http.NewResponseController(w) // flushes through middleware that implements Unwrap
	err = s.eachExperienceJSON(r.Context(), after, limit, func(js []byte) error {
		if _, err := w.Write(append(js, '\n')); err != nil {
			return err
		}
		_ = rc.Flush() // a writer that cannot flush still gets every line
		return nil
	})
	if err != nil {
		slog.Warn("stream experiences", "after", after, "err", err)
	}
}

// sessionItem is one session of GET /v1/sessions.
type sessionItem struct {
	ID       string    `json:"id"`
	State    State     `json:"state"`
	Since    time.Time `json:"since"`
	Calls    int       `json:"calls"`
	Reward   *float64  `json:"reward"` // null without a reward
	Task     string    `json:"task,omitempty"`
	Model    string    `json:"model,omitempty"`
	Created  time.Time `json:"created"`
	LastCall time.Time `json:"last_call"`
}

// handleSessions lists sessions, as hone traces ls does (which cannot open
// the store while hone runs): ?state= (one, or several comma-separated;
// oldest in state first), ?task=, ?since= and ?until= on the creation time
// (ParseTimeAgo), ?limit= (default 100, at most 10000). has_more says
// whether more matched.
func (s *Store) handleSessions(w http.ResponseWriter, r *http.Request) {
	f, limit, err := sessionsFilter(r)
	if err != nil {
		writeError(w, err)
		return
	}
	list := []sessionItem{}
	more := false
	err = s.Sessions(r.Context(), f, func(rec *Session) error {
		if len(list) == limit {
			more = true
			return errListFull
		}
		it := sessionItem{ID: rec.ID, State: rec.State, Since: rec.Since, Calls: rec.Calls, Task: rec.Task,
			Model: rec.Model, Created: rec.Created, LastCall: rec.LastCall}
		if len(rec.Rewards) > 0 {
			v := rec.SessionReward(s.opts.Reward.Combine)
			it.Reward = &v
		}
		list = append(list, it)
		return nil
	})
	if err != nil && !errors.Is(err, errListFull) {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": list, "has_more": more})
}

var errListFull = errors.New("list full")

// ParseTimeAgo reads a time as hone traces and GET /v1/sessions take it: a
// duration before now (24h), RFC 3339, "2006-01-02 15:04:05" or
// "2006-01-02" (local time).
func ParseTimeAgo(v string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(v); err == nil {
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339, time.DateTime, time.DateOnly} {
		if t, err := time.ParseInLocation(layout, v, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("time %q: want RFC3339, 2006-01-02 or a duration like 24h", truncate(v, 40))
}

func sessionsFilter(r *http.Request) (ExportFilter, int, error) {
	q := r.URL.Query()
	var f ExportFilter
	for _, name := range strings.Split(q.Get("state"), ",") {
		if name = strings.TrimSpace(name); name != "" {
			st, err := ParseState(name)
			if err != nil {
				return f, 0, fmt.Errorf("state: %w: %w", err, ErrInvalid)
			}
			f.States = append(f.States, st)
		}
	}
	if f.Task = q.Get("task"); f.Task != "" {
		if _, err := ParseID(f.Task); err != nil {
			return f, 0, fmt.Errorf("task: %w: %w", err, ErrInvalid)
		}
	}
	for name, t := range map[string]*time.Time{"since": &f.Since, "until": &f.Until} {
		v := q.Get(name)
		if v == "" {
			continue
		}
		var err error
		if *t, err = ParseTimeAgo(v, time.Now()); err != nil {
			return f, 0, fmt.Errorf("%s: %w: %w", name, err, ErrInvalid)
		}
	}
	_, limit, err := pageParams(r)
	return f, limit, err
}

func pageParams(r *http.Request) (after uint64, limit int, err error) {
	q := r.URL.Query()
	if v := q.Get("after"); v != "" {
		if after, err = strconv.ParseUint(v, 10, 64); err != nil {
			return 0, 0, fmt.Errorf("after %q: %w", truncate(v, 32), ErrInvalid)
		}
	}
	limit = 100
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit <= 0 || limit > 10000 {
			return 0, 0, fmt.Errorf("limit %q: want 1..10000: %w", truncate(v, 32), ErrInvalid)
		}
	}
	return after, limit, nil
}

func (s *Store) handleAck(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Cursor *uint64 `json:"cursor"`
	}
	if err := decodeBody(w, r, &req, false); err != nil {
		writeError(w, err)
		return
	}
	if req.Cursor == nil {
		writeError(w, fmt.Errorf("cursor is required: %w", ErrInvalid))
		return
	}
	if err := s.Ack(r.Context(), *req.Cursor); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]uint64{"acked": *req.Cursor})
}
