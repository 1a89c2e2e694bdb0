package capture

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
)

func testServer(t *testing.T) (*Store, *httptest.Server) {
	t.Helper()
	s := openTest(t, t.TempDir(), testOptions())
	r := chi.NewRouter()
	s.Routes(r)
	srv := httptest.NewServer(r)
	t.Cleanup(func() { srv.Close(); s.Close() })
	return s, srv
}

func post(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func TestHTTPFeedbackCommitAndErrors(t *testing.T) {
	s, srv := testServer(t)
	calls := runSession(t, s, newVocab(), "web")
	cases := []struct {
		path, body string
		status     int
		errType    string
		param      string // the error's "param" and a word of its message, when set
	}{
		{"/v1/feedback", `{"session":"web","reward":1,"tags":["good"],"comment":"ok"}`, 200, "", ""},
		{"/v1/feedback", `{"call":"` + calls[0].ID + `","reward":0.5}`, 200, "", ""},
		{"/v1/feedback", `{"session":"missing","reward":1}`, 404, "not_found_error", ""},
		{"/v1/feedback", `{"call":"missing","reward":1}`, 404, "not_found_error", ""},
		{"/v1/feedback", `{"session":"web"}`, 400, "invalid_request_error", ""},
		{"/v1/feedback", `{"session":"web","reward":"high"}`, 400, "invalid_request_error", "reward"},
		{"/v1/feedback", `{"session":["web"],"reward":1}`, 400, "invalid_request_error", "session"},
		{"/v1/feedback", `{"session":"web","reward":1,"tags":"good"}`, 400, "invalid_request_error", "tags"},
		{"/v1/feedback", `not json`, 400, "invalid_request_error", ""},
		{"/v1/feedback", `{"session":"web","reward":1`, 400, "invalid_request_error", ""},
		{"/v1/feedback", ``, 400, "invalid_request_error", ""},
		{"/v1/commit", `{"session":"missing"}`, 404, "not_found_error", ""},
		{"/v1/commit", `{}`, 400, "invalid_request_error", ""},
		{"/v1/commit", `{"session":"web"}`, 200, "", ""},
		{"/v1/experiences/ack", `{}`, 400, "invalid_request_error", ""},
	}
	for _, tc := range cases {
		status, out := post(t, srv.URL+tc.path, tc.body)
		if status != tc.status {
			t.Errorf("%s %s: status %d, want %d (%v)", tc.path, tc.body, status, tc.status, out)
			continue
		}
		if tc.errType != "" {
			e, _ := out["error"].(map[string]any)
			if e == nil || e["type"] != tc.errType || e["message"] == "" {
				t.Errorf("%s %s: error body %v, want type %s", tc.path, tc.body, out, tc.errType)
			}
			msg, _ := e["message"].(string)
			if tc.param != "" && (e["param"] != tc.param || !strings.HasPrefix(msg, tc.param+" must be ")) {
				t.Errorf("%s %s: error %v, want param %s named in the message", tc.path, tc.body, e, tc.param)
			}
			if strings.Contains(msg, "Go struct") || strings.Contains(msg, "capture.") {
				t.Errorf("%s %s: message speaks Go: %q", tc.path, tc.body, msg)
			}
		}
	}
	_, out := post(t, srv.URL+"/v1/commit", `{"session":"web"}`)
	if out["state"] != "ready" {
		t.Fatalf("state after commit %v", out)
	}
	resp, err := http.Get(srv.URL + "/v1/sessions/web")
	if err != nil {
		t.Fatal(err)
	}
	var view map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&view)
	resp.Body.Close()
	if resp.StatusCode != 200 || view["state"] != "ready" || len(view["calls_detail"].([]any)) != 3 {
		t.Fatalf("session view %d %v", resp.StatusCode, view)
	}
	resp, _ = http.Get(srv.URL + "/v1/sessions/missing")
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("missing session: %d", resp.StatusCode)
	}
}

func readNDJSON(t *testing.T, url string) []Experience {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/x-ndjson" {
		t.Fatalf("content type %q", ct)
	}
	var out []Experience
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var e Experience
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out
}

func TestHTTPTrinityFeedbackAndCommit(t *testing.T) {
	s, srv := testServer(t)
	v := newVocab()
	a := runSession(t, s, v, "run-a")
	b := runSession(t, s, v, "run-b")
	runSession(t, s, v, "unrewarded")
	ids := func(cs []*Call) string {
		var q []string
		for _, c := range cs {
			q = append(q, `"`+c.ResponseID+`"`)
		}
		return "[" + strings.Join(q, ",") + "]"
	}
	cases := []struct {
		body   string
		status int
	}{
		{`{"msg_ids":` + ids(a) + `,"reward":1.0,"task_id":7,"run_id":0}`, 200},
		{`{"msg_ids":` + ids(b) + `,"reward":0,"task_id":null,"run_id":"r-1"}`, 200},
		{`{"msg_ids":["chatcmpl-unknown"],"reward":1,"task_id":1,"run_id":1}`, 404},
		{`{"msg_ids":[],"reward":1}`, 400},
		{`{"msg_ids":` + ids(a) + `}`, 400},
		{`{"msg_ids":[{}],"reward":1}`, 400},
		{`{"msg_ids":` + ids(a) + `,"reward":1,"run_id":[1]}`, 400},
		// run_id follows task_id's rules: no control characters, 256 bytes
		{`{"msg_ids":` + ids(a) + `,"reward":1,"run_id":"r\u0000\u001b[2J"}`, 400},
		{`{"msg_ids":` + ids(a) + `,"reward":1,"run_id":"` + strings.Repeat("r", 257) + `"}`, 400},
		{`{"msg_ids":[` + strings.Repeat(`"chatcmpl-x",`, maxMsgIDs) + `"chatcmpl-x"],"reward":1}`, 400},
	}
	for _, tc := range cases {
		if status, out := post(t, srv.URL+"/feedback", tc.body); status != tc.status {
			t.Errorf("feedback %s: %d, want %d (%v)", tc.body, status, tc.status, out)
		}
	}
	status, out := post(t, srv.URL+"/commit", ``)
	if status != 200 || len(out["committed"].([]any)) != 2 {
		t.Fatalf("trinity commit: %d %v", status, out)
	}
	if status, _ := post(t, srv.URL+"/commit", `{"anything":null}`); status != 200 {
		t.Fatalf("second commit: %d", status)
	}
	exps := readNDJSON(t, srv.URL+"/v1/experiences?after=0&limit=10")
	if len(exps) != 2 {
		t.Fatalf("experiences %d, want 2 (one per rewarded session): %+v", len(exps), exps[0].Session)
	}
	got := map[string]Experience{}
	for _, e := range exps {
		got[e.Session] = e
	}
	if got["run-a"].Task != "7" || got["run-a"].Reward != 1 || got["run-b"].Reward != 0 {
		t.Fatalf("trinity experiences %+v", got)
	}
	rec, _, _ := s.GetSession(context.Background(), "run-b")
	if rec.RunID != "r-1" {
		t.Fatalf("run id %q", rec.RunID)
	}
	if n := len(readNDJSON(t, srv.URL+"/v1/experiences?after=1")); n != 1 {
		t.Fatalf("after=1: %d", n)
	}
	resp, _ := http.Get(srv.URL + "/v1/experiences?after=x")
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("bad after: %d", resp.StatusCode)
	}
	if status, out := post(t, srv.URL+"/v1/experiences/ack", `{"cursor":2}`); status != 200 {
		t.Fatalf("ack: %d %v", status, out)
	}
	rec, _, _ = s.GetSession(context.Background(), "run-a")
	if rec.State != StateConsumed {
		t.Fatalf("after ack: %s", rec.State)
	}
	if n := len(readNDJSON(t, srv.URL+"/v1/experiences")); n != 0 {
		t.Fatalf("without after, acknowledged experiences are skipped; got %d", n)
	}
}

// With an owner on the request context (the proxy's client-key routes), the
// routes act only on that owner's sessions: 403 for /v1/feedback and
// /v1/commit, unknown ids for Trinity /feedback, own sessions for /commit.
func TestHTTPOwnerRestricted(t *testing.T) {
	s := openTest(t, t.TempDir(), testOptions())
	r := chi.NewRouter()
	r.Use(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if o := req.Header.Get("X-Test-Owner"); o != "" {
				req = req.WithContext(WithOwner(req.Context(), o))
			}
			next.ServeHTTP(w, req)
		})
	})
	s.Routes(r)
	srv := httptest.NewServer(r)
	t.Cleanup(func() { srv.Close(); s.Close() })
	v := newVocab()
	turn(t, s, v, "mine", "key:a", 0, nil, false, true)
	as := func(owner, path, body string) (int, map[string]any) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
		req.Header.Set("X-Test-Owner", owner)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	for _, path := range []string{"/v1/feedback", "/v1/commit"} {
		st, out := as("key:b", path, `{"session":"mine","reward":-5}`)
		e, _ := out["error"].(map[string]any)
		if st != http.StatusForbidden || e["type"] != "permission_error" || e["code"] != "forbidden" {
			t.Fatalf("%s as another key: %d %v", path, st, out)
		}
	}
	if st, _ := as("key:b", "/feedback", `{"msg_ids":["chatcmpl-mine-key:a-0"],"reward":-5}`); st != http.StatusNotFound {
		t.Fatalf("trinity feedback as another key: %d", st)
	}
	if st, _ := as("key:a", "/v1/feedback", `{"session":"mine","reward":1}`); st != http.StatusOK {
		t.Fatalf("owner's feedback: %d", st)
	}
	if st, out := as("key:b", "/commit", ``); st != http.StatusOK || fmt.Sprint(out["committed"]) != "[]" {
		t.Fatalf("trinity commit as another key: %d %v", st, out)
	}
	if st, out := as("key:a", "/commit", ``); st != http.StatusOK || fmt.Sprint(out["committed"]) != "[mine]" {
		t.Fatalf("trinity commit as the owner: %d %v", st, out)
	}
	if rec := session(t, s, "mine"); len(rec.Rewards) != 1 || rec.State != StateReady {
		t.Fatalf("session after the requests: %+v", rec)
	}
}

// A session id may hold "/" (agents use paths and URLs as ids): GET
// /v1/sessions/{id} reads it back sent plain or escaped.
func TestHTTPSessionIDWithSlash(t *testing.T) {
	s, srv := testServer(t)
	v := newVocab()
	turn(t, s, v, "repo/issue-7", "", 0, nil, false, true)
	for _, path := range []string{"repo/issue-7", "repo%2Fissue-7", "repo%2fissue-7"} {
		resp, err := http.Get(srv.URL + "/v1/sessions/" + path)
		if err != nil {
			t.Fatal(err)
		}
		var view map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&view)
		resp.Body.Close()
		if resp.StatusCode != 200 || view["id"] != "repo/issue-7" {
			t.Fatalf("%s: %d %v", path, resp.StatusCode, view)
		}
	}
	for path, want := range map[string]int{"": 400, "repo": 404} {
		resp, err := http.Get(srv.URL + "/v1/sessions/" + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%q: %d, want %d", path, resp.StatusCode, want)
		}
	}
}

// TestHTTPSessionsList: GET /v1/sessions lists sessions with the filters
// hone traces ls has, while hone runs.
func TestHTTPSessionsList(t *testing.T) {
	s, srv := testServer(t)
	v := newVocab()
	for _, id := range []string{"list-a", "list-b", "list-c"} {
		runSession(t, s, v, id)
	}
	if status, _ := post(t, srv.URL+"/v1/feedback", `{"session":"list-b","reward":0.5}`); status != 200 {
		t.Fatal(status)
	}
	if status, _ := post(t, srv.URL+"/v1/commit", `{"session":"list-b"}`); status != 200 {
		t.Fatal(status)
	}
	get := func(query string) (int, struct {
		Data    []sessionItem `json:"data"`
		HasMore bool          `json:"has_more"`
	}) {
		t.Helper()
		var out struct {
			Data    []sessionItem `json:"data"`
			HasMore bool          `json:"has_more"`
		}
		resp, err := http.Get(srv.URL + "/v1/sessions" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	ids := func(items []sessionItem) string {
		var out []string
		for _, it := range items {
			out = append(out, it.ID+":"+string(it.State))
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		query, want string
		more        bool
	}{
		{"", "list-a:open,list-b:ready,list-c:open", false},
		{"?state=open", "list-a:open,list-c:open", false},
		{"?state=ready,open", "list-b:ready,list-a:open,list-c:open", false},
		{"?limit=2", "list-a:open,list-b:ready", true},
		{"?since=1h", "list-a:open,list-b:ready,list-c:open", false},
		{"?until=2000-01-01T00:00:00Z", "", false},
	} {
		status, out := get(tc.query)
		if status != 200 || ids(out.Data) != tc.want || out.HasMore != tc.more {
			t.Errorf("GET /v1/sessions%s: %d %s (more %v), want %s (more %v)", tc.query, status, ids(out.Data), out.HasMore, tc.want, tc.more)
		}
	}
	_, out := get("?state=ready")
	if len(out.Data) != 1 || out.Data[0].Reward == nil || *out.Data[0].Reward != 0.5 || out.Data[0].Calls == 0 {
		t.Errorf("the ready session: %+v", out.Data)
	}
	for _, q := range []string{"?state=gone", "?limit=0", "?since=yesterday", "?task=%00"} {
		if status, _ := get(q); status != 400 {
			t.Errorf("GET /v1/sessions%s: %d, want 400", q, status)
		}
	}
}
