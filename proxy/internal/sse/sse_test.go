package sse

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestReader(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		events   []string
		end      error
	}{
		{"two events", "data: a\n\ndata: [DONE]\n\n", []string{"data: a\n\n", "data: [DONE]\n\n"}, io.EOF},
		{"CRLF and stray blank lines", "\r\n\ndata: x\r\n\r\n\n", []string{"data: x\r\n\r\n"}, io.EOF},
		{"comment and fields", ": c\nevent: e\ndata: 1\n\n", []string{": c\nevent: e\ndata: 1\n\n"}, io.EOF},
		{"cut inside an event", "data: a\n\ndata: part", []string{"data: a\n\n", "data: part"}, io.ErrUnexpectedEOF},
		{"longer than the buffer", "data: " + string(bytes.Repeat([]byte("x"), 40<<10)) + "\n\n",
			[]string{"data: " + string(bytes.Repeat([]byte("x"), 40<<10)) + "\n\n"}, io.EOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewReader(bytes.NewReader([]byte(tc.in)))
			var got []string
			for {
				ev, err := r.Next()
				if err != nil {
					if len(ev) > 0 {
						got = append(got, string(ev))
					}
					if !errors.Is(err, tc.end) {
						t.Fatalf("ended with %v, want %v", err, tc.end)
					}
					break
				}
				got = append(got, string(ev))
			}
			if len(got) != len(tc.events) {
				t.Fatalf("%d events %q, want %q", len(got), got, tc.events)
			}
			for i := range got {
				if got[i] != tc.events[i] {
					t.Errorf("event %d %q, want %q", i, got[i], tc.events[i])
				}
			}
		})
	}
}

// TestCut splits events laid end to end as Reader splits a stream, LF and
// CRLF alike.
func TestCut(t *testing.T) {
	for _, tc := range []struct {
		in     string
		events []string
	}{
		{"data: a\n\ndata: b\n\n", []string{"data: a\n\n", "data: b\n\n"}},
		{"data: a\r\n\r\ndata: b\r\n\r\n", []string{"data: a\r\n\r\n", "data: b\r\n\r\n"}},
		{"event: e\r\ndata: a\r\n\r\ndata: b\n\n", []string{"event: e\r\ndata: a\r\n\r\n", "data: b\n\n"}},
		{"data: a\r\n\ndata: b", []string{"data: a\r\n\n", "data: b"}},
		{"data: a", []string{"data: a"}},
		{"", nil},
	} {
		var got []string
		for rest := []byte(tc.in); len(rest) > 0; {
			var ev []byte
			ev, rest = Cut(rest)
			got = append(got, string(ev))
		}
		if !slices.Equal(got, tc.events) {
			t.Errorf("Cut(%q) = %q, want %q", tc.in, got, tc.events)
		}
	}
}

func TestData(t *testing.T) {
	for _, tc := range []struct {
		ev, data string
		ok       bool
	}{
		{"data: {\"a\":1}\n\n", `{"a":1}`, true},
		{"data:x\r\n\r\n", "x", true},
		{"data: 1\ndata: 2\n\n", "1\n2", true},
		{": comment\nevent: e\n\n", "", false},
		{"event: e\ndata: [DONE]\n\n", "[DONE]", true},
	} {
		data, ok := Data([]byte(tc.ev))
		if string(data) != tc.data || ok != tc.ok {
			t.Errorf("Data(%q) = %q, %v; want %q, %v", tc.ev, data, ok, tc.data, tc.ok)
		}
	}
}

// FuzzReader: the events add up to the input, less the blank lines the
// reader may skip between events; Data never panics on them; Cut splits
// them, laid end to end, back into the same events.
func FuzzReader(f *testing.F) {
	for _, s := range []string{
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"token_ids\":[1]}]}\n\ndata: [DONE]\n\n",
		"data: x\r\n\r\n: comment\n\nevent: e\ndata: 1\ndata: 2\n\n",
		"\n\n\ndata: partial",
	} {
		f.Add([]byte(s))
	}
	paths, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "cases", "*", "upstream.sse"))
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r := NewReader(bytes.NewReader(in))
		var got []byte
		var events []string
		for {
			ev, err := r.Next()
			got = append(got, ev...)
			if len(ev) > 0 {
				events = append(events, string(ev))
			}
			Data(ev)
			if err != nil {
				if err != io.EOF && err != io.ErrUnexpectedEOF {
					t.Fatal(err)
				}
				break
			}
		}
		if !bytes.Equal(stripBlankRuns(got), stripBlankRuns(in)) {
			t.Fatalf("events %q do not add up to input %q", got, in)
		}
		var cut []string
		for rest := got; len(rest) > 0; {
			var ev []byte
			ev, rest = Cut(rest)
			cut = append(cut, string(ev))
		}
		if !slices.Equal(cut, events) {
			t.Fatalf("Cut split %q into %q, the reader into %q", got, cut, events)
		}
	})
}

// stripBlankRuns removes blank lines, which the reader may skip between events.
func stripBlankRuns(b []byte) []byte {
	var out []byte
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		if !isBlankLine(line) {
			out = append(out, line...)
		}
	}
	return out
}

// endless is an engine's body that never ends an event.
type endless struct{ line []byte }

func (e endless) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		n += copy(p[n:], e.line)
	}
	return n, nil
}

// TestEventTooLarge: a stream with no event boundary (no newline at all,
// or lines with no blank line between them) ends with ErrEventTooLarge
// once an event passes MaxEvent, holding no more than that.
func TestEventTooLarge(t *testing.T) {
	for _, line := range []string{"a", "data: x\n"} {
		r := NewReader(endless{[]byte(line)})
		ev, err := r.Next()
		if !errors.Is(err, ErrEventTooLarge) || len(ev) != 0 || cap(r.buf) > 2*MaxEvent+(64<<10) {
			t.Fatalf("%q: %d bytes, %v, buffer %d; want ErrEventTooLarge", line, len(ev), err, cap(r.buf))
		}
	}
	r := NewReader(strings.NewReader("data: " + strings.Repeat("x", MaxEvent-16) + "\n\n"))
	if ev, err := r.Next(); err != nil || len(ev) != MaxEvent-8 {
		t.Fatalf("an event just under the bound: %d bytes, %v", len(ev), err)
	}
}
