// Package sse splits a text/event-stream body into events and reads their
// data fields, byte-exact, for the data plane's streams and continuity's
// conversion of completions streams.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// Reader splits a text/event-stream body into events. An event is
// returned with its terminating blank line, exactly as the engine sent it.
type Reader struct {
	br  *bufio.Reader
	buf []byte
}

// NewReader reads events from r.
func NewReader(r io.Reader) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, 16<<10)}
}

// MaxEvent bounds one event: an engine's chunk is a few KB (a long tool
// call's arguments come in many), so an event past 16 MiB is a stream with
// no event boundary (a broken or hostile engine), not a chunk to hold.
const MaxEvent = 16 << 20

// ErrEventTooLarge is Next's error for an event longer than MaxEvent.
var ErrEventTooLarge = errors.New("an event of the stream exceeds 16 MiB")

// Next returns the next complete event. It returns io.EOF after the last
// complete event, and io.ErrUnexpectedEOF with the partial bytes when the
// stream ends inside an event. The returned slice is valid until next call.
func (r *Reader) Next() ([]byte, error) {
	r.buf = r.buf[:0]
	for {
		line, err := r.br.ReadSlice('\n')
		r.buf = append(r.buf, line...)
		if len(r.buf) > MaxEvent {
			return r.buf[:0], ErrEventTooLarge
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			if err == io.EOF && len(bytes.TrimSpace(r.buf)) > 0 {
				return r.buf, io.ErrUnexpectedEOF
			}
			return r.buf, err
		}
		if isBlankLine(line) {
			if len(r.buf) == len(line) { // stray blank line between events
				r.buf = r.buf[:0]
				continue
			}
			return r.buf, nil
		}
	}
}

// Cut splits buf, events as Reader returns them laid end to end, after its
// first event's blank line ("\n" or "\r\n", as Reader reads them). With no
// blank line, the whole of buf is the event.
func Cut(buf []byte) (ev, rest []byte) {
	for i := 0; i < len(buf); {
		j := bytes.IndexByte(buf[i:], '\n')
		if j < 0 {
			break
		}
		if line := buf[i : i+j+1]; i > 0 && isBlankLine(line) {
			return buf[:i+j+1], buf[i+j+1:]
		}
		i += j + 1
	}
	return buf, nil
}

func isBlankLine(line []byte) bool {
	return len(line) == 1 || (len(line) == 2 && line[0] == '\r')
}

// Data returns the data field of an event (data lines joined by "\n")
// and whether the event has one. Comments and other fields are ignored.
func Data(ev []byte) ([]byte, bool) {
	var data []byte
	found := false
	for len(ev) > 0 {
		i := bytes.IndexByte(ev, '\n')
		var line []byte
		if i < 0 {
			line, ev = ev, nil
		} else {
			line, ev = ev[:i], ev[i+1:]
		}
		line = bytes.TrimSuffix(line, []byte{'\r'})
		if !bytes.HasPrefix(line, []byte("data:")) {
			continue
		}
		v := bytes.TrimPrefix(line[5:], []byte{' '})
		if found {
			data = append(data, '\n')
			data = append(data, v...)
		} else if bytes.IndexByte(ev, 'd') < 0 { // common case: one data line, no copy
			return v, true
		} else {
			data = append(data[:0:0], v...)
		}
		found = true
	}
	return data, found
}
