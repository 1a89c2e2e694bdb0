package main

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hone-rl/hone/model/modeltest"
)

// A standalone engine without a key stays on loopback and refuses what a
// web page could send it; with a key it wants the key.
func TestEngineStandaloneGuards(t *testing.T) {
	err := runEngine(context.Background(), []string{"--model", "unused", "--listen", "0.0.0.0:8000"})
	if err == nil || !strings.Contains(err.Error(), "--api-key") {
		t.Fatalf("a keyless engine on 0.0.0.0: %v, want refused naming --api-key", err)
	}
	dir := modeltest.Tiny(t, modeltest.Options{Seed: 1})
	for _, c := range []struct {
		key    string
		header map[string]string
		want   int
	}{
		{"", nil, 200},
		{"", map[string]string{"Origin": "http://evil.example"}, 403},
		{"", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403},
		{"", map[string]string{"Host": "evil.example:8000"}, 403},
		{"sk-e", nil, 401},
		{"sk-e", map[string]string{"Authorization": "Bearer sk-e", "Origin": "http://evil.example"}, 200},
	} {
		url := startEngineCmd(t, dir, c.key)
		req, _ := http.NewRequest("POST", url+"/sleep?level=1", strings.NewReader("{}"))
		req.Header.Set("Content-Type", "text/plain")
		for k, v := range c.header {
			if k == "Host" {
				req.Host = v
			} else {
				req.Header.Set(k, v)
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("key %q, headers %v: POST /sleep answered %d, want %d", c.key, c.header, resp.StatusCode, c.want)
		}
	}
}

// startEngineCmd runs `hone engine` on a free loopback port until the test
// ends and returns its URL once it answers /health.
func startEngineCmd(t *testing.T, dir, key string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	args := []string{"--model", dir, "--listen", addr, "--threads", "1"}
	if key != "" {
		args = append(args, "--api-key", key)
	}
	go func() { done <- runEngine(ctx, args) }()
	t.Cleanup(func() { cancel(); <-done })
	url := "http://" + addr
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get(url + "/health"); err == nil {
			resp.Body.Close()
			return url
		}
		select {
		case err := <-done:
			t.Fatalf("hone engine %v: %v", args, err)
		default:
		}
	}
	t.Fatalf("hone engine on %s did not answer /health", addr)
	return ""
}
