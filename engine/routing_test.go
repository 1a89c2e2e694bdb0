package engine

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestRoutingErrors: unknown routes and wrong methods answer vLLM's JSON
// error (its HTTPException handler), not net/http's plain text.
func TestRoutingErrors(t *testing.T) {
	_, srv := newTestEngine(t, DefaultOptions())
	noLoRA := DefaultOptions()
	noLoRA.DisableRuntimeLoRA = true
	_, srvNoLoRA := newTestEngine(t, noLoRA)
	for _, c := range []struct {
		name, base, method, path string
		code                     int
		allow                    string
	}{
		{"unknown /v1 route", srv.URL, http.MethodPost, "/v1/embeddings", 404, ""},
		{"unknown root route", srv.URL, http.MethodGet, "/nope", 404, ""},
		{"GET on chat", srv.URL, http.MethodGet, "/v1/chat/completions", 405, "POST"},
		{"DELETE on models", srv.URL, http.MethodDelete, "/v1/models", 405, "GET, HEAD"},
		{"PUT on completions", srv.URL, http.MethodPut, "/v1/completions", 405, "POST"},
		{"runtime LoRA off", srvNoLoRA.URL, http.MethodPost, "/v1/load_lora_adapter", 404, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest(c.method, c.base+c.path, strings.NewReader("{}"))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var r struct {
				Error *struct {
					Message string  `json:"message"`
					Type    string  `json:"type"`
					Param   *string `json:"param"`
					Code    int     `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(b, &r); err != nil || r.Error == nil {
				t.Fatalf("not a JSON error (%v): %q", err, b)
			}
			phrase := http.StatusText(c.code)
			if resp.StatusCode != c.code || r.Error.Code != c.code || r.Error.Message != phrase || r.Error.Type != phrase ||
				r.Error.Param != nil {
				t.Fatalf("got %d %s", resp.StatusCode, b)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("content type %q", ct)
			}
			if got := resp.Header.Get("Allow"); got != c.allow {
				t.Errorf("Allow %q, want %q", got, c.allow)
			}
		})
	}
	// A served route is untouched.
	resp, err := http.Get(srv.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/v1/models: %d", resp.StatusCode)
	}
}
