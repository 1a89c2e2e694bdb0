package jsonenc

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
)

// codeLiteral is a Go source file (testdata/code.go.txt: this package's
// source when the benchmark was first run, kept so runs stay comparable)
// as a coding agent's request carries it in a tool result: a JSON string
// as JSON.stringify writes it (an escape on every line, <, > and & raw).
func codeLiteral(b *testing.B) string {
	src, err := os.ReadFile("testdata/code.go.txt")
	if err != nil {
		b.Fatal(err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(string(src)); err != nil {
		b.Fatal(err)
	}
	return string(bytes.TrimSpace(buf.Bytes()))
}

func BenchmarkAppendLiteralCode(b *testing.B) {
	raw := codeLiteral(b)
	out := make([]byte, 0, 2*len(raw))
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		out = AppendLiteral(out[:0], raw)
	}
}

func BenchmarkEncodedCode(b *testing.B) {
	raw := string(AppendString(nil, codeLiteral(b))) // json.Marshal's form: passed on as it is
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if !Encoded(raw) {
			b.Fatal("not encoded")
		}
	}
}
