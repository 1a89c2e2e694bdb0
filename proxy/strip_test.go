package proxy

// strip returns body stripped as by stripInto, or body itself when nothing
// changes (for tests).
func strip(body []byte, spans []injected, a asked) []byte {
	if !stripping(spans, a) {
		return body
	}
	return stripInto(nil, body, spans, a)
}
