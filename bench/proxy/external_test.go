package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"github.com/valyala/fasthttp"
)

func TestCPUListLen(t *testing.T) {
	for s, want := range map[string]int{"": 0, "0": 1, "0-1": 2, "0-1,3": 3, " 2 , 4-7": 5, "x": 0, "3-1": 0} {
		if got := cpuListLen(s); got != want {
			t.Errorf("cpuListLen(%q) = %d, want %d", s, got, want)
		}
	}
}

func TestRoundOrder(t *testing.T) {
	for run, want := range []string{"[0 1 2 3]", "[0 2 3 1]", "[0 3 1 2]", "[0 1 2 3]"} {
		if got := fmt.Sprint(roundOrder(4, run)); got != want {
			t.Errorf("roundOrder(4, %d) = %s, want %s", run, got, want)
		}
	}
	if got := fmt.Sprint(roundOrder(1, 3)); got != "[0]" {
		t.Errorf("roundOrder(1, 3) = %s", got)
	}
}

// TestReplyBody: the generated reply is valid JSON with n tokens, and 7 is
// the recorded runs' reply byte for byte.
func TestReplyBody(t *testing.T) {
	if replyBody(7) != chatBody || buildReply(7) != chatBody {
		t.Fatalf("the 7-token reply is not chatBody:\n%s\n%s", buildReply(7), chatBody)
	}
	for _, n := range []int{1, 8, 64} {
		b := replyBody(n)
		if !gjson.Valid(b) {
			t.Fatalf("replyBody(%d) is not JSON: %s", n, b)
		}
		if got := gjson.Get(b, "choices.0.logprobs.content.#").Int(); got != int64(n) {
			t.Fatalf("replyBody(%d): %d logprob entries", n, got)
		}
		if got := gjson.Get(b, "choices.0.token_ids.#").Int(); got != int64(n) {
			t.Fatalf("replyBody(%d): %d token ids", n, got)
		}
		t.Logf("%d tokens: %d bytes", n, len(b))
	}
	if b := replyBody(14); !strings.HasPrefix(gjson.Get(b, "choices.0.message.content").String(), "Hello! How can I help?Hello!") {
		t.Fatalf("replyBody(14) content: %s", gjson.Get(b, "choices.0.message.content"))
	}
}

// TestEchoReply: -prompt-ids echo's answer is the stub's reply with n prompt
// ids (at least 10) in place of the fixed ones, and nothing else changed.
func TestEchoReply(t *testing.T) {
	stubReplyBody = replyBody(64)
	defer func() { stubReplyBody = chatBody }()
	for _, n := range []int{0, 10, 8000} {
		b := echoReply(n)
		if !gjson.Valid(b) {
			t.Fatalf("echoReply(%d) is not JSON", n)
		}
		if got := gjson.Get(b, "prompt_token_ids.#").Int(); got != int64(max(n, 10)) {
			t.Fatalf("echoReply(%d): %d prompt ids", n, got)
		}
		if gjson.Get(b, "choices.0.logprobs.content.#").Int() != 64 || gjson.Get(b, "choices.0.token_ids.#").Int() != 64 {
			t.Fatalf("echoReply(%d) lost the answer's tokens", n)
		}
	}
}

// TestSetReply: every reply the stub sends has an id of its own, as vLLM's
// do, made from the request's X-Request-Id when it has one, and is
// otherwise the reply it was given.
func TestSetReply(t *testing.T) {
	var r fasthttp.Response
	setReply(&r, chatBody, []byte("call-1"))
	if id := gjson.GetBytes(r.Body(), "id").String(); id != "chatcmpl-call-1" {
		t.Fatalf("reply id %q for X-Request-Id call-1, want chatcmpl-call-1", id)
	}
	seen := map[string]bool{}
	for _, body := range []string{chatBody, replyBody(64), echoReply(100)} {
		setReply(&r, body, nil)
		id := gjson.GetBytes(r.Body(), "id").String()
		if len(id) != len("chatcmpl-")+32 || !strings.HasPrefix(id, "chatcmpl-") || seen[id] {
			t.Fatalf("reply id %q: want chatcmpl- and 32 hex digits, unseen", id)
		}
		seen[id] = true
		if got := strings.Replace(string(r.Body()), id, "chatcmpl-bench", 1); got != body {
			t.Fatalf("setReply changed more than the id:\n%s\n%s", got, body)
		}
	}
}

func TestParseStat(t *testing.T) {
	// A command name with spaces and a parenthesis, as /proc prints it.
	line := "4242 (nginx: a (b) c) S 1 4240 4240 0 -1 4194624 100 0 0 0 7 5 0 0 20 0 1 0 100 1000 10"
	pgrp, cpu, ok := parseStat([]byte(line))
	if !ok || pgrp != 4240 || cpu != 120*time.Millisecond {
		t.Fatalf("parseStat = %d, %v, %v; want 4240, 120ms, true", pgrp, cpu, ok)
	}
	if _, _, ok := parseStat([]byte("garbage")); ok {
		t.Fatal("parseStat accepted a line without fields")
	}
	if procCPU(os.Getpid()) <= 0 {
		t.Fatal("procCPU of this process is 0")
	}
}

// TestConfigsStayInTheirFolder: the generated configurations name no path
// outside their folder (nothing of root's), and the installed binaries
// accept them.
func TestConfigsStayInTheirFolder(t *testing.T) {
	for _, name := range []string{"nginx", "haproxy"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			p := externals[name]
			cmd, err := p.start(p.bins[0], dir, "127.0.0.1:1", "127.0.0.1:2", 2)
			if err != nil {
				t.Fatal(err)
			}
			conf, err := os.ReadFile(cmd.Args[len(cmd.Args)-1])
			if err != nil {
				t.Fatal(err)
			}
			for _, field := range strings.Fields(string(conf)) {
				field = strings.TrimSuffix(field, ";")
				if field != "/" && strings.HasPrefix(field, "/") && !strings.HasPrefix(field, dir) { // "location /" aside
					t.Errorf("path outside the folder: %s", field)
				}
			}
			for _, want := range map[string][]string{
				"nginx":   {"worker_processes 2;", "keepalive 64;", "proxy_http_version 1.1;", `proxy_set_header Connection "";`, "proxy_buffering off;", "access_log off;", "client_body_buffer_size 1m;"},
				"haproxy": {"nbthread 2", "mode http", "http-reuse always", "option http-no-delay", "timeout server"},
			}[name] {
				if !strings.Contains(string(conf), want) {
					t.Errorf("config lacks %q", want)
				}
			}
			bin, err := findBin(p.bins)
			if err != nil {
				t.Skipf("%v: the syntax check needs it", err)
			}
			check := exec.Command(bin, "-t", "-p", dir+"/", "-e", filepath.Join(dir, "error.log"), "-c", filepath.Join(dir, "nginx.conf"))
			if name == "haproxy" {
				check = exec.Command(bin, "-c", "-f", filepath.Join(dir, "haproxy.cfg"))
			}
			if out, err := check.CombinedOutput(); err != nil {
				t.Fatalf("%s rejects the config: %v\n%s", name, err, out)
			}
		})
	}
}

// TestExternalProxies starts nginx and HAProxy (where installed) in front
// of the stub: a chat call passes, a stream arrives event by event, CPU
// counts nginx's workers, and stop leaves no process behind.
func TestExternalProxies(t *testing.T) {
	fixedBody = requestBody()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	shutdown, _ := serveRole("stub", ln, "")
	defer shutdown()
	stubURL := "http://" + ln.Addr().String()
	for _, name := range []string{"nginx", "haproxy"} {
		t.Run(name, func(t *testing.T) {
			p := externals[name]
			bin, err := findBin(p.bins)
			if err != nil {
				t.Skipf("%v (apt-get install %s)", err, p.pkg)
			}
			c, err := spawnExternal(p, bin, stubURL, 2)
			if err != nil {
				t.Fatal(err)
			}
			defer c.stop()
			var cv conversation
			client := newClient()
			for i := 0; i < 50; i++ {
				if _, err := doOnce(client, c.url, &cv); err != nil {
					t.Fatalf("chat call %d: %v", i, err)
				}
			}
			// Long prompts: nginx keeps a body over client_body_buffer_size
			// in a temp file, which its workers (nobody, when started as
			// root) must reach.
			fixedBody = []byte(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("x", 2<<20) + `"}]}`)
			_, err = doOnce(client, c.url, &cv)
			fixedBody = requestBody()
			if err != nil {
				t.Fatalf("chat call with a 2 MB body: %v (%s)", err, readLogs(c.dir))
			}
			lat, chunks, evs, err := oneStream(c.url)
			if err != nil {
				t.Fatal(err)
			}
			// -events chunks, then the usage chunk and [DONE] in one write;
			// on a loaded machine a proxy reads two events sent 2 ms apart
			// in one read now and then and writes them as one chunk (32
			// chunks for 34 events in one make test run), so most events,
			// not all, must come in chunks of their own.
			if evs != *events+2 || len(lat) != *events+1 || chunks < evs*3/4 {
				t.Fatalf("stream: %d events in %d chunks (%d timed); want %d events, most in a chunk of their own", evs, chunks, len(lat), *events+2)
			}
			// Each event on time: HAProxy without option http-no-delay
			// delivered them in separate chunks but ~18 ms late.
			if p50 := pct(lat, 50); p50 > 5000 {
				t.Fatalf("stream: per-event latency p50 %.0f us: events held back", p50)
			}
			if c.cpu() <= 0 {
				t.Fatal("no CPU counted")
			}
			procs := groupPids(c.pid())
			if name == "nginx" && len(procs) != 3 {
				t.Fatalf("nginx's process group: %v, want a master and 2 workers", procs)
			}
			c.stop()
			if left := groupPids(c.pid()); len(left) > 0 {
				t.Fatalf("processes left after stop: %v", left)
			}
			if _, err := os.Stat(c.dir); !os.IsNotExist(err) {
				t.Fatalf("folder %s left after stop", c.dir)
			}
		})
	}
}

// groupPids lists the live processes of process group pgid.
func groupPids(pgid int) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		if g, _, ok := parseStat(b); ok && g == pgid && !strings.Contains(string(b), ") Z ") {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestTurnsJoinSessions: with -turns, each request sends back the stub's
// reply as it was for -reply-tokens, so hone's session inference joins a
// conversation's turns (it joined none when the reply was longer than the
// seven tokens the conversation assumed).
func TestTurnsJoinSessions(t *testing.T) {
	for _, n := range []int{7, 64} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			*replyTokens, *turns = n, 4
			defer func() { *replyTokens, *turns = 7, 1 }()
			stubTurn = sync.OnceValue(func() string { return replyTurn(n) })
			stub := local("stub", "")
			defer stub.stop()
			hone := local("hone-capture", stub.url)
			client := newClient()
			var cv conversation
			for i := 0; i < 8; i++ {
				if _, err := doOnce(client, hone.url, &cv); err != nil {
					t.Fatal(err)
				}
			}
			hone.stop() // flushes the store's queue
			fams := scrape(hone.metrics)
			calls, sessions := counterSum(fams, "hone_capture_calls_stored_total"), counterSum(fams, "hone_capture_sessions_total")
			if calls != 8 || sessions != 2 {
				t.Fatalf("8 calls of 2 conversations of 4 turns: stored %v calls in %v sessions, want 8 in 2", calls, sessions)
			}
		})
	}
}
