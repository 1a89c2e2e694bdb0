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

// The walk a translated call no longer makes: inspect over the engine's
// chat request that a coding agent's call becomes (the translation reads
// it as it writes it).
func BenchmarkInspectTranslated(b *testing.B) {
	for _, c := range []struct {
		api  surface
		name string
	}{{messagesSurface{}, "messages-coding-40.json"}, {responsesSurface{}, "responses-coding-40.json"}} {
		b.Run(c.api.label(), func(b *testing.B) {
			body, err := os.ReadFile("../testdata/requests/" + c.name)
			if err != nil {
				b.Fatal(err)
			}
			tr, aerr := c.api.translate(testServer(), "", body)
			if aerr != nil {
				b.Fatal(aerr)
			}
			b.SetBytes(int64(len(tr.body)))
			for b.Loop() {
				if _, _, ok := inspect(tr.body, chatDialect); !ok {
					b.Fatal("not a JSON object")
				}
			}
		})
	}
}
