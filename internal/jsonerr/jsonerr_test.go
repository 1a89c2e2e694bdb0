package jsonerr

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestDescribe(t *testing.T) {
	type inner struct {
		N float64 `json:"n"`
	}
	type body struct {
		Reward float64  `json:"reward"`
		Count  int      `json:"count"`
		Tags   []string `json:"tags"`
		Name   string   `json:"name"`
		On     *bool    `json:"on"`
		In     inner    `json:"in"`
	}
	for _, tc := range []struct{ in, msg, field string }{
		{`{"reward":"high"}`, "reward must be a number, not a JSON string", "reward"},
		{`{"tags":"a,b"}`, "tags must be an array, not a JSON string", "tags"},
		{`{"name":3}`, "name must be a string, not a JSON number", "name"},
		{`{"on":"yes"}`, "on must be true or false, not a JSON string", "on"},
		{`{"count":1.5}`, "count must be an integer, not a JSON number 1.5", "count"},
		{`{"count":1e30}`, "count must be an integer, not a JSON number 1e30", "count"},
		{`{"in":{"n":"1"}}`, "in.n must be a number, not a JSON string", "in.n"},
		{`{"in":[]}`, "in must be an object, not a JSON array", "in"},
		{`{"reward":}`, "the body is not valid JSON (at byte 11)", ""},
		{`{"reward":1`, "the body is not valid JSON (it ends early)", ""},
		{``, "the body is empty", ""},
		{`{"rewrad":1}`, `unknown field "rewrad"`, "rewrad"},
		{`[]`, "the body must be an object, not a JSON array", ""},
		{`"x"`, "the body must be an object, not a JSON string", ""},
		{`{"a\"b":1}`, `unknown field "a\"b"`, `a"b`},
	} {
		dec := json.NewDecoder(strings.NewReader(tc.in))
		dec.DisallowUnknownFields()
		var v body
		err := dec.Decode(&v)
		if err == nil {
			t.Fatalf("%s: decoded", tc.in)
		}
		msg, field := Describe(err)
		if msg != tc.msg || field != tc.field {
			t.Errorf("%s: %q (field %q), want %q (%q); from %v", tc.in, msg, field, tc.msg, tc.field, err)
		}
	}
	w := httptest.NewRecorder()
	r := http.MaxBytesReader(w, io.NopCloser(bytes.NewReader([]byte(`{"name":"long"}`))), 4)
	var v body
	if msg, _ := Describe(json.NewDecoder(r).Decode(&v)); msg != "the body is larger than 4 bytes" {
		t.Errorf("an oversized body: %q", msg)
	}
}
