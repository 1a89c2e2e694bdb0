package capture

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/klauspost/compress/s2"
)

// Call records are a version byte followed by fields in a fixed order:
// varints for integers, length-prefixed strings and bytes, token ids as a
// count and zigzag varint deltas, logprobs as raw little-endian float32.

var errTruncated = errors.New("truncated record")

// maxSliceLen bounds decoded slice lengths so corrupt records cannot make
// the decoder allocate unbounded memory.
const maxSliceLen = 1 << 26

type encoder struct{ b []byte }

func (e *encoder) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *encoder) str(s string)     { e.uvarint(uint64(len(s))); e.b = append(e.b, s...) }
func (e *encoder) bytes(p []byte)   { e.uvarint(uint64(len(p))); e.b = append(e.b, p...) }

// nulled writes p as bytes does, with each of spans (sorted, apart, within
// p) written as null. Spans that are not are ignored: p is written whole.
func (e *encoder) nulled(p []byte, spans [][2]int) {
	n, last := len(p), 0
	for _, s := range spans {
		if s[0] < last || s[1] < s[0] || s[1] > len(p) {
			e.bytes(p)
			return
		}
		n += 4 - (s[1] - s[0])
		last = s[1]
	}
	e.uvarint(uint64(n))
	last = 0
	for _, s := range spans {
		e.b = append(append(e.b, p[last:s[0]]...), "null"...)
		last = s[1]
	}
	e.b = append(e.b, p[last:]...)
}

func (e *encoder) bool(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

func (e *encoder) time(t time.Time) {
	if t.IsZero() {
		e.varint(0)
		return
	}
	e.varint(t.UnixNano())
}

// ids writes the count, then each id's difference from the one before as
// binary.AppendVarint does (zigzag, 7 bits a byte), into room made once
// (AppendVarint's appends byte by byte cost a tenth more).
func (e *encoder) ids(ids []int32) {
	e.uvarint(uint64(len(ids)))
	e.b = slices.Grow(e.b, binary.MaxVarintLen64*len(ids))
	b := e.b[len(e.b):cap(e.b)]
	n := 0
	var prev int64
	for _, id := range ids {
		d := int64(id) - prev
		prev = int64(id)
		u := uint64(d) << 1
		if d < 0 {
			u = ^u
		}
		for u >= 0x80 {
			b[n] = byte(u) | 0x80
			u >>= 7
			n++
		}
		b[n] = byte(u)
		n++
	}
	e.b = e.b[:len(e.b)+n]
}

func (e *encoder) f32s(v []float32) {
	e.uvarint(uint64(len(v)))
	for _, f := range v {
		e.b = binary.LittleEndian.AppendUint32(e.b, math.Float32bits(f))
	}
}

func (e *encoder) optF64(p *float64) {
	if p == nil {
		e.b = append(e.b, 0)
		return
	}
	e.b = append(e.b, 1)
	e.b = binary.LittleEndian.AppendUint64(e.b, math.Float64bits(*p))
}

func (e *encoder) strs(ss []string) {
	e.uvarint(uint64(len(ss)))
	for _, s := range ss {
		e.str(s)
	}
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail() { d.err = errTruncated; d.b = nil }

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) take(n uint64) []byte {
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) length(elem uint64) int {
	n := d.uvarint()
	if n > maxSliceLen || n*elem > uint64(len(d.b)) {
		d.fail()
		return 0
	}
	return int(n)
}

func (d *decoder) str() string { return string(d.take(d.uvarint())) }

func (d *decoder) bytes() []byte {
	p := d.take(d.uvarint())
	if len(p) == 0 {
		return nil
	}
	return append([]byte(nil), p...)
}

func (d *decoder) bool() bool { p := d.take(1); return len(p) == 1 && p[0] == 1 }

func (d *decoder) time() time.Time {
	n := d.varint()
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func (d *decoder) ids() []int32 {
	n := d.length(1)
	if n == 0 {
		return nil
	}
	out := make([]int32, n)
	var prev int64
	for i := range out {
		prev += d.varint()
		out[i] = int32(prev)
	}
	return out
}

func (d *decoder) f32s() []float32 {
	n := d.length(4)
	if n == 0 {
		return nil
	}
	p := d.take(uint64(n) * 4)
	if p == nil {
		return nil
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(p[i*4:]))
	}
	return out
}

func (d *decoder) optF64() *float64 {
	p := d.take(1)
	if len(p) == 0 || p[0] == 0 {
		return nil
	}
	q := d.take(8)
	if q == nil {
		return nil
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(q))
	return &v
}

func (d *decoder) strs() []string {
	n := d.length(1)
	if n == 0 {
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = d.str()
	}
	return out
}

// seqOffset is where a record's fixed-size sequence number sits: the
// writer assigns it after the encoder goroutine has encoded the call.
const seqOffset = 1

// patchSeq sets the sequence number of an encoded call record.
func patchSeq(rec []byte, seq uint64) { binary.BigEndian.PutUint64(rec[seqOffset:], seq) }

// compressedCall marks a record whose bytes after the sequence number are
// S2-compressed (klauspost/compress; Snappy's format family, ~1 GB/s): the
// prompts and bodies of long agent calls compress several-fold, and every
// byte written is one the value log's mapped file takes in on Badger's write
// path, where 10 ms stalls with 33 KB records made the tail.
const compressedCall = 0x80 | SchemaVersion

// compressAbove is the record size from which the encoder compresses. A
// chat answer with logprobs is mostly repeated JSON keys: vLLM's 2-5 KB
// answers (proxy/testdata/cases/*vllm*) shrink to 45-60% in about a
// microsecond, which costs less than the value log's page faults on the
// bytes saved (bench/RESULTS.md: 8% less CPU per captured call on a
// 5.8 KB answer, whose synthetic logprobs compress further than real ones).
const compressAbove = 2 << 10

// compactCall returns rec, or its compressed form when that is worth it.
// The header (format byte and sequence number) stays uncompressed, so
// patchSeq works on both forms. S2 needs room for its worst case; scratch,
// when given, holds that room across calls, and the compressed record gets
// an allocation of its own size only.
func compactCall(rec []byte, scratch *[]byte) []byte {
	if len(rec) < compressAbove {
		return rec
	}
	body := rec[seqOffset+8:]
	var buf []byte
	if scratch != nil {
		buf = *scratch
	}
	if n := s2.MaxEncodedLen(len(body)); cap(buf) < n {
		buf = make([]byte, n)
		if scratch != nil && n <= maxScratch {
			*scratch = buf
		}
	}
	z := s2.Encode(buf[:cap(buf)], body)
	if len(z) >= len(body)*7/8 {
		return rec // incompressible (token ids of random text): keep the plain form
	}
	out := make([]byte, seqOffset+8+len(z))
	copy(out, rec[:seqOffset+8])
	copy(out[seqOffset+8:], z)
	out[0] = compressedCall
	return out
}

// maxScratch bounds the compression buffer an encoder keeps between calls.
const maxScratch = 1 << 20

// expandCall returns the plain form of a compressed record.
func expandCall(rec []byte) ([]byte, error) {
	if len(rec) < seqOffset+8 {
		return nil, errTruncated
	}
	n, err := s2.DecodedLen(rec[seqOffset+8:])
	if err == nil && n > 1<<30 {
		err = errTruncated // no record is that large (bodies stop at 32 MiB): a damaged header
	}
	if err != nil {
		return nil, fmt.Errorf("call record: %w", err)
	}
	out := make([]byte, seqOffset+8+n)
	copy(out, rec[:seqOffset+8])
	if _, err := s2.Decode(out[seqOffset+8:], rec[seqOffset+8:]); err != nil {
		return nil, fmt.Errorf("call record: %w", err)
	}
	out[0] = SchemaVersion
	return out, nil
}

// encodeCall appends the versioned binary form of c to buf.
func encodeCall(buf []byte, c *Call) []byte {
	e := encoder{b: binary.BigEndian.AppendUint64(append(buf, SchemaVersion), c.Seq)}
	for _, s := range []string{c.ID, c.Session, c.Task, c.Route, c.Model, c.Upstream, c.Engine, c.Policy, c.ResponseID, string(c.Status), c.Error} {
		e.str(s)
	}
	e.varint(c.Version)
	e.bool(c.Stream)
	e.time(c.Start)
	e.time(c.End)
	e.varint(int64(c.TTFT))
	e.varint(int64(c.Latency))
	e.varint(int64(c.HTTPStatus))
	e.bytes(c.Request)
	e.nulled(c.Response, c.ResponseNulls)
	e.ids(c.PromptIDs)
	e.uvarint(uint64(len(c.Choices)))
	for i := range c.Choices {
		encodeChoice(&e, &c.Choices[i])
	}
	e.varint(int64(c.Usage.PromptTokens))
	e.varint(int64(c.Usage.CompletionTokens))
	e.varint(int64(c.Usage.TotalTokens))
	encodeHone(&e, &c.Hone)
	return e.b
}

func encodeChoice(e *encoder, ch *Choice) {
	e.varint(int64(ch.Index))
	e.ids(ch.TokenIDs)
	e.f32s(ch.Logprobs)
	e.str(ch.Content)
	e.str(ch.Reasoning)
	e.str(ch.FinishReason)
	e.ids(ch.PromptIDs)
	e.uvarint(uint64(len(ch.ToolCalls)))
	for _, tc := range ch.ToolCalls {
		e.varint(int64(tc.Index))
		e.str(tc.ID)
		e.str(tc.Type)
		e.str(tc.Name)
		e.str(tc.Arguments)
	}
}

func encodeHone(e *encoder, h *HoneHeaders) {
	e.str(h.Session)
	e.str(h.Task)
	e.varint(int64(h.Train))
	e.strs(h.Tags)
	e.optF64(h.Reward)
	e.bool(h.Commit)
}

// decodeCall parses a record written by encodeCall.
func decodeCall(b []byte) (*Call, error) {
	if len(b) == 0 {
		return nil, errTruncated
	}
	if b[0] == compressedCall {
		var err error
		if b, err = expandCall(b); err != nil {
			return nil, err
		}
	}
	if b[0] != SchemaVersion {
		return nil, fmt.Errorf("call record version %d: unsupported", b[0])
	}
	if len(b) < seqOffset+8 {
		return nil, errTruncated
	}
	d := decoder{b: b[seqOffset+8:]}
	c := &Call{Seq: binary.BigEndian.Uint64(b[seqOffset:])}
	for _, p := range []*string{&c.ID, &c.Session, &c.Task, &c.Route, &c.Model, &c.Upstream, &c.Engine, &c.Policy, &c.ResponseID, (*string)(&c.Status), &c.Error} {
		*p = d.str()
	}
	c.Version = d.varint()
	c.Stream = d.bool()
	c.Start = d.time()
	c.End = d.time()
	c.TTFT = time.Duration(d.varint())
	c.Latency = time.Duration(d.varint())
	c.HTTPStatus = int(d.varint())
	c.Request = d.bytes()
	c.Response = d.bytes()
	c.PromptIDs = d.ids()
	if n := d.length(1); n > 0 {
		c.Choices = make([]Choice, n)
		for i := range c.Choices {
			decodeChoice(&d, &c.Choices[i])
		}
	}
	c.Usage.PromptTokens = int(d.varint())
	c.Usage.CompletionTokens = int(d.varint())
	c.Usage.TotalTokens = int(d.varint())
	decodeHone(&d, &c.Hone)
	if d.err != nil {
		return nil, fmt.Errorf("decode call: %w", d.err)
	}
	return c, nil
}

func decodeChoice(d *decoder, ch *Choice) {
	ch.Index = int(d.varint())
	ch.TokenIDs = d.ids()
	ch.Logprobs = d.f32s()
	ch.Content = d.str()
	ch.Reasoning = d.str()
	ch.FinishReason = d.str()
	ch.PromptIDs = d.ids()
	if n := d.length(1); n > 0 {
		ch.ToolCalls = make([]ToolCall, n)
		for i := range ch.ToolCalls {
			tc := &ch.ToolCalls[i]
			tc.Index = int(d.varint())
			tc.ID = d.str()
			tc.Type = d.str()
			tc.Name = d.str()
			tc.Arguments = d.str()
		}
	}
}

func decodeHone(d *decoder, h *HoneHeaders) {
	h.Session = d.str()
	h.Task = d.str()
	h.Train = int8(d.varint())
	h.Tags = d.strs()
	h.Reward = d.optF64()
	h.Commit = d.bool()
}
