package proxy

import (
	"bytes"
	"errors"
	"io"
	"time"

	"github.com/hone-rl/hone/capture"
	"github.com/hone-rl/hone/proxy/internal/sse"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
	"github.com/valyala/fasthttp"
)

// streamBody is the body of a streamed answer. fasthttp pulls it with Read
// and writes and flushes each Read as one chunk, so returning one SSE event
// per Read puts every event in its own write, as soon as the engine sent it
// (SetBodyStreamWriter's pipe would batch events). Each event is teed into
// the call's accumulator and stripped of what hone injected.
type streamBody struct {
	c       *call
	resp    *fasthttp.Response
	events  *sse.Reader
	pending []byte
	out     []byte
	ended   bool // upstream finished (cleanly or not)
	sawDone bool // the engine sent data: [DONE]
	closed  bool
	held    []byte // a final chunk waiting for the usage chunk (see release)
	settled bool   // the call was handed over before the stream closed
	failed  error  // the engine's stream broke; returned once the encoder's error event is out
}

func newStreamBody(c *call, resp *fasthttp.Response) *streamBody {
	return &streamBody{c: c, resp: resp, events: sse.NewReader(resp.BodyStream())}
}

// Read returns the rest of the current event, or the next event (one
// event per Read, so each is written and flushed on its own).
func (b *streamBody) Read(p []byte) (int, error) {
	for len(b.pending) == 0 {
		if b.failed != nil {
			return 0, b.failed
		}
		if b.ended {
			return 0, io.EOF
		}
		ev, err := b.events.Next()
		t := time.Now()
		if b.c.firstEvent.IsZero() && len(ev) > 0 {
			b.c.firstEvent = t
		}
		if err != nil {
			return b.upstreamEnded(ev, err)
		}
		b.c.s.m.bytesIn.Add(float64(len(ev)))
		b.pending = b.process(ev)
		b.c.inHone += time.Since(t)
	}
	// one event per Read: a translated API's encoder may turn one engine
	// event into several, and each goes out in its own write
	ev, _ := sse.Cut(b.pending)
	n := copy(p, ev)
	b.pending = b.pending[n:]
	b.c.s.m.bytesOut.Add(float64(n))
	return n, nil
}

// upstreamEnded handles the end of the engine's stream: io.EOF is a clean
// end; anything else (engine closed mid-event, timeout) ends the agent's
// stream with an error after the events it already has.
func (b *streamBody) upstreamEnded(partial []byte, err error) (int, error) {
	b.ended = true
	b.c.upstreamDone = time.Now()
	if err == io.EOF && !b.sawDone && b.c.dialect.captured() { // other inference routes' streams need not end with [DONE]
		err = errNoDone
	}
	if err == io.EOF {
		b.resp.CloseBodyStream() //nolint:errcheck // returns the connection to the pool
		fasthttp.ReleaseResponse(b.resp)
		b.resp = nil
		return 0, io.EOF
	}
	if len(partial) > 0 {
		err = errors.Join(err, errors.New("engine closed the stream inside an event"))
	}
	b.c.fail(err)
	b.abortUpstream(err)
	if held := b.release(nil, nil); len(held) > 0 {
		b.pending, b.failed = held, err // what the engine sent still reaches the agent
		return 0, nil
	}
	if ev := b.c.reply.broken("the engine's stream broke: " + err.Error()); ev != nil {
		// a translated API says so in its own error event before the
		// stream is cut, as its server would
		b.pending, b.failed = ev, err
		return 0, nil
	}
	return 0, err
}

// process tees one event and returns what the agent gets (nil drops it).
func (b *streamBody) process(ev []byte) []byte {
	data, ok := sse.Data(ev)
	if ok && bytes.Equal(data, []byte("[DONE]")) {
		if b.sawDone {
			return nil // an engine's second [DONE]: the call ended at the first
		}
		b.sawDone = true
		b.settleBeforeDone()
		return b.c.reply.done(b, ev)
	}
	return b.c.reply.event(b, ev, data, ok)
}

// release returns the held events (if any) followed by next. From the
// first chunk that ends a choice, events are held when hone asked for the
// usage chunk the agent did not: vLLM then moves fields from the final
// chunks onto the usage chunk (system_fingerprint), and they are put back
// (from usage, the dropped chunk) on every final chunk before the agent sees
// it, as vLLM would have sent them. Token events before the first final
// chunk are not delayed; with n > 1, the other choices' remaining events
// wait with the first final chunk.
func (b *streamBody) release(usage, next []byte) []byte {
	if len(b.held) == 0 {
		return next
	}
	fp := gjson.GetBytes(usage, "system_fingerprint")
	out := make([]byte, 0, len(b.held)+len(next)+64)
	for rest := b.held; len(rest) > 0; {
		var ev []byte
		ev, rest = sse.Cut(rest)
		if fp.Exists() && fp.Type != gjson.Null {
			ev = withFingerprint(ev, fp.Raw)
		}
		out = append(out, ev...)
	}
	b.held = b.held[:0]
	return append(out, next...)
}

// withFingerprint puts system_fingerprint on a chunk that ends a choice and
// lacks it.
func withFingerprint(ev []byte, fp string) []byte {
	data, ok := sse.Data(ev)
	if !ok || gjson.GetBytes(data, "system_fingerprint").Exists() {
		return ev
	}
	ends := false
	for _, ch := range gjson.GetBytes(data, "choices").Array() {
		ends = ends || ch.Get("finish_reason").Type == gjson.String
	}
	if !ends {
		return ev
	}
	patched, err := sjson.SetRawBytes(bytes.Clone(data), "system_fingerprint", []byte(fp))
	if err != nil {
		return ev
	}
	return append(append([]byte("data: "), patched...), "\n\n"...)
}

// CloseWithError is called by fasthttp once the answer is written or the
// write failed. A stream the engine had not finished means the agent went
// away: the upstream connection is closed, which cancels the generation.
func (b *streamBody) CloseWithError(err error) error {
	if b.closed {
		return nil
	}
	b.closed = true
	if b.settled {
		if !b.ended { // the agent went away after [DONE], before the engine's end
			b.ended = true
			b.abortUpstream(errClientGone)
		}
		return nil
	}
	if !b.ended {
		b.ended = true
		b.c.upstreamDone = time.Now()
		b.c.status = capture.StatusClientDisconnected
		if err != nil {
			b.c.errMsg = err.Error()
		}
		b.abortUpstream(errClientGone)
	}
	b.c.done()
	return nil
}

// settleBeforeDone hands a complete captured call to the recorder before
// data: [DONE] reaches the agent, and, when it carried X-Hone-Reward or
// X-Hone-Commit, holds [DONE] until they are stored: agents treat [DONE] as
// the acknowledgement, and may send their next call, their feedback, or
// exit, right after it. The recorder's queue is ordered, so feedback,
// commits and the session's next call that follow [DONE] find this call
// (recorded after the last byte, a quick /v1/feedback got "session not
// found" and a quick next call was stitched before it).
func (b *streamBody) settleBeforeDone() {
	c := b.c
	if !c.verdict.Capture {
		return
	}
	c.upstreamDone = time.Now()
	b.settled = true
	c.done()
	if c.hh.Reward != nil || c.hh.Commit {
		c.awaitDurable()
	}
}

var (
	errClientGone = errors.New("client disconnected")
	errNoDone     = errors.New("engine ended the stream without data: [DONE]")
)

// abortUpstream closes the engine connection without reading the rest.
func (b *streamBody) abortUpstream(err error) {
	if b.resp == nil {
		return
	}
	if bs, ok := b.resp.BodyStream().(fasthttp.ReadCloserWithError); ok {
		_ = bs.CloseWithError(err)
	}
	b.resp = nil // not released: releasing would close the stream a second time
}
