package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// The data plane never logs a byte of a request head, whatever the head
// looks like: fasthttp's parse errors quote the head, and a credential
// header need not be spelt "Name: value" (no colon, a tab, a folded line, a
// query string). These tests plant a secret in broken heads and look for it
// in everything the proxy logs, at every level.

const redactSecret = "sk-live_9fQ2xTzK4mWb7RcE1hJ0pLd"

// brokenHeads are request heads fasthttp refuses, each with {S} where the
// secret goes.
var brokenHeads = []struct{ name, head string }{
	{"x-api-key without colon", "POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nX-Api-Key {S}\r\nContent-Length: 2\r\n\r\n{}"},
	{"authorization with a tab", "POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nAuthorization\tBearer {S}\r\nContent-Length: 2\r\n\r\n{}"},
	{"authorization without colon", "POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nAuthorization Bearer {S}\r\n\r\n"},
	{"multiple spaces", "GET /v1/models HTTP/1.1\r\nHost: h\r\nX-Api-Key    {S}\r\n\r\n"},
	{"lowercase", "GET /v1/models HTTP/1.1\r\nhost: h\r\nauthorization bearer {S}\r\n\r\n"},
	{"tab before colon", "GET /v1/models HTTP/1.1\r\nHost: h\r\nX-Api-Key\t: {S}\r\n\r\n"},
	{"api-key equals", "GET /v1/models HTTP/1.1\r\nHost: h\r\nApi-Key={S}\r\n\r\n"},
	{"folded first line", "GET /v1/models HTTP/1.1\r\n Authorization: Bearer {S}\r\nHost: h\r\n\r\n"},
	{"folded continuation", "GET /v1/models HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer\r\n\t{S}\r\nX Bad\r\n\r\n"},
	{"nul in the name", "GET /v1/models HTTP/1.1\r\nHost: h\r\nX-Api-Key\x00: {S}\r\n\r\n"},
	{"nul in the value", "GET /v1/models HTTP/1.1\r\nHost: h\r\nX-Api-Key: {S}\x00\r\n\r\n"},
	{"nul before the name", "GET /v1/models HTTP/1.1\r\nHost: h\r\n\x00Authorization: Bearer {S}\r\n\r\n"},
	{"bare cr", "GET /v1/models HTTP/1.1\r\nHost: h\r\nX-Api-Key\r{S}\r\n\r\n"},
	{"secret in the query, no version", "GET /v1/models?api_key={S}\r\nHost: h\r\n\r\n"},
	{"secret in the query, bad version", "GET /v1/models?api_key={S} HTTP/9.9\r\nHost: h\r\n\r\n"},
	{"secret in the query, extra word", "GET /v1/models?api_key={S} HTTP/1.1 x\r\nHost: h\r\n\r\n"},
	{"secret in the query, broken header", "GET /v1/models?api_key={S} HTTP/1.1\r\nHost: h\r\nX Bad\r\n\r\n"},
	{"secret in the path, bad uri", "GET v1/{S} HTTP/1.1\r\nHost: h\r\n\r\n"},
	{"secret as method", "{S} /v1/models HTTP/1.1\r\nHost: h\r\n\r\n"},
	{"secret as the whole line", "{S}\r\n\r\n"},
	{"secret in the host port", "GET http://h:{S}/v1/models HTTP/1.1\r\nHost: h\r\n\r\n"},
	{"secret in the host", "GET http://[{S}/v1/models HTTP/1.1\r\nHost: h\r\n\r\n"},
	{"secret in userinfo, bad port", "GET http://{S}@h:x/v1/models HTTP/1.1\r\nHost: h\r\n\r\n"},
	{"secret as the scheme", "GET {S}://h/v1/models HTTP/1.1\r\nHost: h\r\n\r\n"},
	{"transfer-encoding", "POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: {S}\r\n\r\n"},
	{"content-length", "POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nContent-Length: {S}\r\n\r\n"},
	{"two hosts", "GET /v1/models HTTP/1.1\r\nHost: h\r\nHost: {S}\r\n\r\n"},
	{"no host", "GET /v1/models?key={S} HTTP/1.1\r\nX-Api-Key: {S}\r\n\r\n"},
	{"quote in the name", "GET /v1/models HTTP/1.1\r\nHost: h\r\nX-\"Api\"-Key {S}\r\n\r\n"},
	{"quote and backslash", "GET /v1/models HTTP/1.1\r\nHost: h\r\nX-Api-Key \\\" {S} \"\r\n\r\n"},
	{"utf-8 and invalid bytes", "GET /v1/models HTTP/1.1\r\nHost: h\r\nX-Clé\xff\xfe {S}\r\n\r\n"},
	{"bad chunk size", "POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n{S}\r\n"},
	{"bad chunk end", "POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5{S}\r\n"},
	{"multipart header without colon", multipartHead("--b\r\nX-Api-Key {S}\r\n\r\nv\r\n--b--\r\n")},
	{"multipart junk", multipartHead("junk {S}\r\n--b\r\n\r\n")},
	{"cut head", "POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nX-Api-Key {S}"},
	{"very long head", "POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\n" + strings.Repeat("X-Pad: "+strings.Repeat("p", 90)+"\r\n", 150) +
		"X-Api-Key {S}\r\n" + strings.Repeat("X-Pad: "+strings.Repeat("q", 90)+"\r\n", 40) + "\r\n"},
	{"very long line", "GET /v1/models?" + strings.Repeat("a=1&", 2000) + "k={S} HTTP/1.1 x\r\nHost: h\r\n\r\n"},
}

func multipartHead(body string) string {
	return "POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: " +
		strconv.Itoa(len(strings.ReplaceAll(body, "{S}", redactSecret))) + "\r\n\r\n" + body
}

func plant(head, secret string) []byte { return []byte(strings.ReplaceAll(head, "{S}", secret)) }

// TestRedactFasthttpErrors: every error fasthttp itself makes of a broken
// head, with its request bytes (RequestHeader.Read and Request.Read quote
// the buffer: SecureErrorLogMessage is off there), and as the worker pool
// and RequestCtx.Logger print it, loses the secret and keeps its kind.
func TestRedactFasthttpErrors(t *testing.T) {
	local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	remote := &net.TCPAddr{IP: net.ParseIP("::1"), Port: 51234}
	for _, tc := range brokenHeads {
		t.Run(tc.name, func(t *testing.T) {
			err := parseErr(plant(tc.head, redactSecret))
			if err == nil {
				t.Skip("fasthttp parses it") // the server tests still send it
			}
			for _, msg := range []string{
				err.Error(),
				fmt.Sprintf("error when serving connection %q<->%q: %v", local, remote, err),
				fmt.Sprintf("%.3f %s - %s", 0.25, "#0000000100000001 - 127.0.0.1:8080<->127.0.0.1:5555 - GET http://h/v1/models?key="+redactSecret, err),
			} {
				out := redact(msg)
				assertNoSecret(t, out, redactSecret)
				if out == "" || len(out) > 400 {
					t.Errorf("redact(%.200q) = %q", msg, out)
				}
			}
			// the kind: fasthttp's text up to the first quoted byte
			kind := err.Error()
			if i := strings.IndexAny(kind, `"'`); i >= 0 {
				kind = kind[:i]
			}
			out := redact(fmt.Sprintf("error when serving connection %q<->%q: %v", local, remote, err))
			if !strings.HasPrefix(out, `error when serving connection "127.0.0.1:8080"<->"[::1]:51234": `+kind) {
				t.Errorf("redact lost the addresses or the kind %q: %q", kind, out)
			}
		})
	}
}

// parseErr reads head as fasthttp's server does (head, URI, body), in
// fasthttp's default (echoing) mode.
func parseErr(head []byte) error {
	var req fasthttp.Request
	br := bufio.NewReaderSize(bytes.NewReader(head), 64<<10)
	if err := req.Header.Read(br); err != nil {
		return err
	}
	var u fasthttp.URI
	if err := u.Parse(req.Header.Host(), req.Header.RequestURI()); err != nil {
		return err
	}
	return req.ContinueReadBody(br, 1<<20, true)
}

func assertNoSecret(t testing.TB, out, secret string) {
	t.Helper()
	if strings.Contains(out, secret) {
		t.Fatalf("the secret reached the log: %.2000s", out)
	}
	// nor a long piece of it (a cut snippet)
	for _, piece := range []string{secret[:len(secret)/2], secret[len(secret)/2:]} {
		if len(piece) >= 12 && strings.Contains(out, piece) {
			t.Fatalf("part of the secret (%s) reached the log: %.2000s", piece, out)
		}
	}
}

// TestRedactSpellings: the messages as fasthttp formats them, by hand, for
// the spellings redact used to miss, and the kind that must survive.
func TestRedactSpellings(t *testing.T) {
	s := redactSecret
	for _, tc := range []struct{ in, keep string }{
		{fmt.Sprintf("error when reading request headers: malformed MIME header: missing colon: %q. Buffer size=77", "X-Api-Key "+s), "missing colon"},
		{fmt.Sprintf("error when reading request headers: malformed MIME header: missing colon: %q. Buffer size=77", "Authorization\tBearer "+s), "Buffer size=77"},
		{fmt.Sprintf("error when reading request headers: invalid header key %q. Buffer size=9", "X-Api-Key\x00"+s), "invalid header key"},
		{fmt.Sprintf("error when reading request headers: invalid header value %q. Buffer size=9", s+"\x00"), "invalid header value"},
		{fmt.Sprintf("error when reading request headers: cannot find whitespace in the first line of request %q. Buffer size=9", "GET /?k="+s+"\r\n\r\n"), "first line of request"},
		{fmt.Sprintf("error when reading request headers: unsupported HTTP version %q. Buffer size=9", "HTTP/1.1 "+s), "unsupported HTTP version"},
		{fmt.Sprintf("error when reading request headers: invalid requestURI %q in %q: invalid uri", "v1/"+s, "GET v1/"+s+" HTTP/1.1"), "invalid uri"},
		{fmt.Sprintf("error when reading request headers: small read buffer. Increase ReadBufferSize. Buffer size=9, contents: %q...%q", "GET / HTTP/1.1\r\nX-Api-Key "+s[:10], s[10:]+"\r\n"), "contents:"},
		{fmt.Sprintf("invalid port %q after host", ":"+s), "invalid port"},
		{fmt.Sprintf("multipart: NextPart: malformed MIME header line: %q", "X-Api-Key "+s), "malformed MIME header line"},
		{fmt.Sprintf("unexpected char %q at the end of chunk size. Expected %q", 'x', '\n'), "at the end of chunk size"},
		{fmt.Sprintf("unexpected char %q at the end of chunk size: expected %q", 'x', '\n'), "at the end of chunk size"},
		// escapes, quotes and backslashes inside the quoted bytes
		{fmt.Sprintf("invalid header key %q", `X-"Api"\Key `+s+"\"\\\x01\u2028\xff"), "invalid header key"},
		// unquoted request bytes: a future fasthttp, RequestCtx.Logger
		{"invalid header key X-Api-Key " + s, "invalid header key"},
		{"malformed MIME header: missing colon: Authorization\tBearer " + s + ". Buffer size=9", "missing colon"},
		{"0.001 #0000000100000002 - 127.0.0.1:8080<->127.0.0.1:4444 - GET http://h/v1/models?key=" + s + " - oops", "127.0.0.1:4444"},
		{"something went wrong: \"Authorization Bearer " + s, "something went wrong"},
		// fasthttp 1.78's spellings of the same errors, should they lose their quotes
		{"error when reading request headers: invalid request uri /v1/" + s + ": buffer size=9", "invalid request uri"},
		{"request uri cannot be empty in GET " + s, "request uri cannot be empty"},
		{"unsupported http version HTTP/" + s, "unsupported http version"},
		{"unsupported http request method " + s, "unsupported http request method"},
		{"unsupported transfer-encoding: " + s, "unsupported transfer-encoding"},
		{"malformed mime header line: " + s, "malformed mime header line"},
		{"forbidden trailer key " + s, "forbidden trailer key"},
		{"invalid trailer value " + s, "invalid trailer value"},
		{"invalid response status code 2" + s + ": response HTTP/1.1 2" + s, "invalid response status code"},
		{"non-zero body for non-post request: body=" + s, "non-zero body"},
		{"raw bytes: GET / HTTP/1.1\r\nX-Api-Key " + s, "raw bytes"},
		{"raw bytes: \xff" + s, "raw bytes"},
		// the old regexes stay as a second layer
		{"x-api-key: " + s + " while reading", "while reading"},
		{"X-Api-Key " + s + " while reading", "while reading"},
		{"Authorization\tBearer " + s, "Authorization"},
		{"token=" + s, "token="},
	} {
		out := redact(tc.in)
		assertNoSecret(t, out, s)
		if !strings.Contains(out, tc.keep) {
			t.Errorf("redact(%q) = %q lost %q", tc.in, out, tc.keep)
		}
		if again := redact(out); again != out {
			t.Errorf("redact is not idempotent: %q then %q", out, again)
		}
	}
	// the connection's addresses are kept; nothing else quoted is
	for in, want := range map[string]string{
		`error when serving connection "127.0.0.1:8080"<->"[::1]:5555": EOF`:      `error when serving connection "127.0.0.1:8080"<->"[::1]:5555": EOF`,
		`invalid host "127.0.0.1:80x"`:                                            `invalid host "[omitted]"`,
		`invalid host "[fe80::1%eth0]:80"`:                                        `invalid host "[omitted]"`,
		`cannot find whitespace in "" and ""`:                                     `cannot find whitespace in "[omitted]" and "[omitted]"`,
		`read tcp 127.0.0.1:8080->127.0.0.1:5555: read: connection reset by peer`: `read tcp 127.0.0.1:8080->127.0.0.1:5555: read: connection reset by peer`,
	} {
		if out := redact(in); out != want {
			t.Errorf("redact(%q) = %q, want %q", in, out, want)
		}
	}
}

// TestLoggerRedactsPrintf: serverLog keeps fasthttp's addresses and kind.
func TestLoggerRedactsPrintf(t *testing.T) {
	var buf bytes.Buffer
	l := serverLog{slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	err := fmt.Errorf("error when reading request headers: %w. Buffer size=%d", fmt.Errorf("malformed MIME header: missing colon: %q", "X-Api-Key "+redactSecret), 40)
	l.Printf("error when serving connection %q<->%q: %v", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80}, &net.TCPAddr{IP: net.IPv4(10, 0, 0, 2), Port: 4000}, err)
	out := buf.String()
	assertNoSecret(t, out, redactSecret)
	for _, want := range []string{"level=WARN", "127.0.0.1:80", "10.0.0.2:4000", "missing colon", "Buffer size=40"} {
		if !strings.Contains(out, want) {
			t.Errorf("log %q lacks %q", out, want)
		}
	}
}

// --- through a running proxy -------------------------------------------------

// lockedBuffer collects the proxy's log lines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) take() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.b.String()
	l.b.Reset()
	return s
}

type redactHone struct {
	addr string
	logs *lockedBuffer
}

// startRedactHone starts a proxy in front of a stub engine, logging at
// Debug into a buffer. secure false turns fasthttp's SecureErrorLogMessage
// off, so fasthttp quotes the whole buffer in its errors (the worst case).
func startRedactHone(tb testing.TB, secure bool) *redactHone {
	tb.Helper()
	eln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	engine := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		ctx.SetContentType("application/json")
		ctx.SetBodyString(`{"object":"list","data":[]}`)
	}}
	go engine.Serve(eln) //nolint:errcheck
	tb.Cleanup(func() { _ = engine.Shutdown() })

	o := DefaultOptions()
	o.Upstream.Engines = []EngineOptions{{URL: "http://" + eln.Addr().String()}}
	o.ReadTimeout = 2 * time.Second
	o.MaxHeaderBytes = 32 << 10
	if err := o.Validate(); err != nil {
		tb.Fatal(err)
	}
	logs := &lockedBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := New(o, NewMemRecorder(), nil, log)
	if err != nil {
		tb.Fatal(err)
	}
	s.srv.SecureErrorLogMessage = secure
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	go s.Serve(ln) //nolint:errcheck
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	h := &redactHone{addr: ln.Addr().String(), logs: logs}
	h.send(tb, []byte("GET /v1/models HTTP/1.1\r\nHost: h\r\n\r\n")) // served: the proxy is up
	h.logs.take()
	return h
}

// send writes head on a new connection, closes the writing side and reads
// the answer until the proxy closes the connection. fasthttp logs a
// connection's error before it closes it, and readError logs before it
// answers, so the log lines of this head are in logs when send returns.
func (h *redactHone) send(tb testing.TB, head []byte) []byte {
	tb.Helper()
	c, err := net.DialTimeout("tcp", h.addr, 5*time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = c.Write(head) // the proxy may answer and close before it read it all
	_ = c.(*net.TCPConn).CloseWrite()
	out, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		tb.Fatalf("the proxy did not close the connection: %.300q", out)
	}
	return out
}

// unparsed: the proxy answered with readError's 400 (and so logged the
// error at Debug).
func unparsed(answer []byte) bool {
	return bytes.HasPrefix(answer, []byte("HTTP/1.1 400")) && bytes.Contains(answer, []byte("cannot parse the HTTP request"))
}

// TestRedactHead sends each broken head to a running proxy, with
// fasthttp's secure error messages on (as hone runs) and off, and looks for
// the secret in every log line.
func TestRedactHead(t *testing.T) {
	for _, secure := range []bool{true, false} {
		h := startRedactHone(t, secure)
		logged := 0
		for _, tc := range brokenHeads {
			answer := h.send(t, plant(tc.head, redactSecret))
			logs := h.logs.take()
			assertNoSecret(t, logs, redactSecret)
			if unparsed(answer) {
				if !strings.Contains(logs, "unreadable request") {
					t.Errorf("%s: a 400 without its Debug line: %q", tc.name, logs)
				}
				if bytes.Contains(answer, []byte(redactSecret)) { // readError's answer never echoes
					t.Errorf("%s: the answer echoes the secret: %.300q", tc.name, answer)
				}
			}
			if logs != "" {
				logged++
			}
			t.Logf("secure=%v %s: %.12q -> %s", secure, tc.name, answer, strings.TrimSpace(logs))
		}
		if logged < len(brokenHeads)/2 {
			t.Fatalf("secure=%v: only %d of %d broken heads were logged; the check would be vacuous", secure, logged, len(brokenHeads))
		}
	}
}

// FuzzRedactHead sends broken request heads with a planted secret to a
// running proxy over TCP and asserts the secret reaches no log line at any
// level. head is arbitrary bytes: every {S} in it becomes the secret, or,
// without one, the secret goes in at offset at. The secret is sk- and at
// least 13 characters of [A-Za-z0-9_-] made of raw, so it cannot occur in
// the proxy's own text by chance.
func FuzzRedactHead(f *testing.F) {
	for _, tc := range brokenHeads {
		f.Add([]byte(tc.head), []byte("9fQ2xTzK4mWb7RcE"), uint16(0), true)
	}
	f.Add([]byte("POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nX-Api-Key {S}\r\n\r\n"), []byte("abc"), uint16(0), false)
	f.Add([]byte("POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nAuthorization\tBearer {S}\r\n\r\n"), []byte("xyz"), uint16(0), false)
	f.Add([]byte("GET / HTTP/1.1\r\nHost: h\r\nX-Api-Key \r\n\r\n"), []byte("planted-secret"), uint16(41), true)
	f.Add([]byte("GET /?q= HTTP/1.1\r\n\r\n"), []byte{0, 1, 2, 250}, uint16(8), false)

	hones := map[bool]*redactHone{true: startRedactHone(f, true), false: startRedactHone(f, false)}
	var last string // the previous secret: a line logged late
	f.Fuzz(func(t *testing.T, head, raw []byte, at uint16, secure bool) {
		if len(head) > 40<<10 {
			return
		}
		secret := plantedSecret(raw)
		var req []byte
		if bytes.Contains(head, []byte("{S}")) {
			req = bytes.ReplaceAll(head, []byte("{S}"), []byte(secret))
		} else {
			i := int(at) % (len(head) + 1)
			req = append(append(append([]byte{}, head[:i]...), secret...), head[i:]...)
		}
		h := hones[secure]
		answer := h.send(t, req)
		logs := h.logs.take()
		assertNoSecret(t, logs, secret)
		if last != "" {
			assertNoSecret(t, logs, last)
		}
		last = secret
		if unparsed(answer) && !strings.Contains(logs, "unreadable request") {
			t.Fatalf("the proxy refused the head but logged nothing (the check is vacuous): %q", logs)
		}
	})
}

const secretAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"

// plantedSecret is sk- and 13 to 61 characters of [A-Za-z0-9_-] from raw
// (padded when raw is short).
func plantedSecret(raw []byte) string {
	b := []byte("sk-")
	for i := 0; len(b) < 16 || (i < len(raw) && len(b) < 64); i++ {
		c := byte(i*37 + len(raw)*11 + 5)
		if i < len(raw) {
			c = raw[i]
		}
		b = append(b, secretAlphabet[c%64])
	}
	return string(b)
}

// FuzzRedactError parses heads with fasthttp in its echoing mode and
// redacts the error as the proxy would log it.
func FuzzRedactError(f *testing.F) {
	for _, tc := range brokenHeads {
		f.Add([]byte(tc.head), []byte("9fQ2xTzK4mWb7RcE"))
	}
	f.Fuzz(func(t *testing.T, head, raw []byte) {
		secret := plantedSecret(raw)
		req := head
		if bytes.Contains(head, []byte("{S}")) {
			req = bytes.ReplaceAll(head, []byte("{S}"), []byte(secret))
		} else {
			req = append(append([]byte{}, head...), secret...)
		}
		err := parseErr(req)
		if err == nil {
			return
		}
		msg := fmt.Sprintf("error when serving connection %q<->%q: %v", "127.0.0.1:1", "127.0.0.1:2", err)
		assertNoSecret(t, redact(msg), secret)
		assertNoSecret(t, redact(err.Error()), secret)
	})
}
