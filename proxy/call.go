package proxy

import (
	"cmp"
	"errors"
	"strconv"
	"time"

	"github.com/hone-rl/hone/capture"
	"github.com/valyala/fasthttp"
)

// call is the state of one proxied chat/completions call.
type call struct {
	ended     bool // done ran
	s         *Server
	api       surface
	reply     reply   // how the answer reaches the agent: native or translated
	upPath    []byte  // the engine route and query
	dialect   dialect // the engine API the request goes to
	id        string
	answerID  string // the id of a translated answer (reply.named): the one the agent sees
	model     string // as the agent asked
	target    string // as sent upstream
	policy    Policy
	isAlias   bool
	release   func()
	hh        capture.HoneHeaders
	warnings  []string // hone headers that were ignored, for X-Hone-Warning
	owner     string   // the client key's owner id (Admission.Owner)
	durable   chan error
	verdict   capture.Verdict
	asked     asked
	eng       *engine
	streaming bool

	start, sentAt, firstEvent, upstreamDone time.Time
	inHone                                  time.Duration // processing time inside hone after the first byte

	reqBody, respBody []byte
	respNulls         [][2]int // where respBody holds the prompt ids (stored as null)
	acc               accumulator
	status            capture.Status
	httpStatus        int
	errMsg            string
}

// fail records why the call ended early.
func (c *call) fail(err error) {
	c.errMsg = err.Error()
	switch {
	case isTimeout(err):
		c.status = capture.StatusTimeout
	default:
		c.status = capture.StatusUpstreamBroken
	}
}

// failEarly answers the agent with hone's own error and ends the call
// (counted once, under the status the agent got).
func (c *call) failEarly(ctx *fasthttp.RequestCtx, e *apiError) {
	c.httpStatus = e.status
	c.done()
	c.awaitDurable()
	c.api.writeError(ctx, e)
}

// durableWait bounds how long an answer waits for its reward or commit to
// be stored.
const durableWait = 10 * time.Second

// awaitDurable waits, when the call carried X-Hone-Reward or X-Hone-Commit
// and was recorded, until the store has them on disk, so an acknowledged
// reward or commit survives a crash. It returns a warning for the agent
// when they could not be stored in time.
func (c *call) awaitDurable() string {
	if c.durable == nil {
		return ""
	}
	start := time.Now()
	t := time.NewTimer(durableWait)
	defer t.Stop()
	defer func() { c.s.m.durableWait.Observe(time.Since(start).Seconds()) }()
	select {
	case err := <-c.durable:
		if err != nil {
			if errors.Is(err, capture.ErrInvalid) { // the call and its commit are stored, the reward refused
				return "reward refused: " + err.Error()
			}
			c.s.log.Warn("reward or commit from headers not stored", "call", c.id, "err", err)
			return "reward/commit not stored: " + err.Error()
		}
		return ""
	case <-t.C:
		c.s.log.Warn("reward or commit from headers not durable in time", "call", c.id, "wait", durableWait)
		return "reward/commit not yet stored after " + durableWait.String()
	}
}

// done ends the call: metrics, in-flight counts, and the handover to the
// recorder. Token ids that must come from /tokenize are fetched off the hot
// path first.
func (c *call) done() {
	if c.ended {
		return // once: a second end would count, release and record the call again
	}
	c.ended = true
	now := time.Now()
	s := c.s
	if c.release != nil {
		c.release()
	}
	s.observeRollout(c)
	if c.eng != nil {
		c.eng.outstanding.Add(-1)
	}
	if c.streaming {
		s.m.openStreams.Dec()
	}
	route := c.api.label() // the API the agent called (a translated call's engine route is chat)
	s.m.requests.WithLabelValues(route, strconv.Itoa(c.httpStatus)).Inc()
	if !c.sentAt.IsZero() && !c.upstreamDone.IsZero() {
		s.m.upstream.WithLabelValues(route).Observe(c.upstreamDone.Sub(c.sentAt).Seconds())
		s.m.overhead.WithLabelValues(route).Observe((c.sentAt.Sub(c.start) + c.inHone + now.Sub(c.upstreamDone)).Seconds())
	}
	if !c.firstEvent.IsZero() {
		s.m.ttft.WithLabelValues(route).Observe(c.firstEvent.Sub(c.start).Seconds())
	}
	if !c.verdict.Capture {
		return
	}
	if c.eng == nil { // no engine ever answered, or its request could not be rewritten
		s.rec.Abandon(c.id, c.verdict.Session, c.owner)
		return
	}
	rec := c.record(now)
	if c.hh.Reward != nil || c.hh.Commit {
		c.durable = make(chan error, 1)
		rec.Durable = c.durable
	}
	if s.needsTokenize(rec) {
		s.tokenizeLater(c.eng, rec)
		return
	}
	s.rec.Record(rec)
}

func (c *call) record(end time.Time) *capture.Call {
	rec := &capture.Call{
		ID: c.id, Session: c.verdict.Session, Task: c.hh.Task, Route: c.dialect.route(), Model: c.model, Upstream: c.target,
		Policy: c.policy.Alias, Version: c.policy.Version, Stream: c.asked.stream, ResponseID: cmp.Or(c.answerID, c.acc.id),
		Start: c.start, End: end, Latency: end.Sub(c.start), Status: c.status, HTTPStatus: c.httpStatus,
		Error: c.errMsg, Request: c.reqBody, Response: c.respBody, ResponseNulls: c.respNulls, PromptIDs: c.acc.promptIDs,
		Choices: c.acc.choices, Usage: c.acc.usage, Hone: c.hh, NewSession: c.verdict.New, Owner: c.owner,
	}
	if c.eng != nil {
		rec.Engine = c.eng.url
	}
	if !c.firstEvent.IsZero() {
		rec.TTFT = c.firstEvent.Sub(c.start)
	}
	if rec.Status == capture.StatusOK && c.httpStatus < 400 && !c.acc.complete() {
		rec.Status, rec.Error = capture.StatusUpstreamInvalid, "engine answered "+strconv.Itoa(c.httpStatus)+
			" with a body that is not a completion"
	}
	if c.streaming && rec.Response == nil && c.acc.id != "" {
		rec.Response = c.acc.aggregate()
	}
	return rec
}
