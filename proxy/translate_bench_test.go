package proxy

import (
	"os"
	"testing"
)

// The coding-agent requests of testdata/requests translated to the
// engine's chat request, one goroutine: the bytes in to the bytes out, as
// bench/translate/litellm_translate.py times LiteLLM's translation.

func BenchmarkTranslateMessages(b *testing.B) {
	benchTranslate(b, messagesSurface{}, "messages-coding-40.json")
}

func BenchmarkTranslateResponses(b *testing.B) {
	benchTranslate(b, responsesSurface{}, "responses-coding-40.json")
}

func benchTranslate(b *testing.B, api surface, name string) {
	body, err := os.ReadFile("../testdata/requests/" + name)
	if err != nil {
		b.Fatal(err)
	}
	verify := verifyEncoded // a test's check, not what hone does
	verifyEncoded = false
	defer func() { verifyEncoded = verify }()
	s := testServer()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := api.translate(s, "", body); err != nil {
			b.Fatal(err)
		}
	}
}
