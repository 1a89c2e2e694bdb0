package proxy

import "slices"

// stripInto appends body to dst with what hone injected and the client did
// not ask for set to null (logprobs, token ids), as the engine writes those
// fields when they are not requested. spans are the positions the
// accumulator noted while walking body. changed reports whether any span was
// nulled.
func stripInto(dst, body []byte, spans []injected, a asked) (out []byte, changed bool) {
	slices.SortFunc(spans, func(x, y injected) int { return x.start - y.start })
	last := 0
	for _, s := range spans {
		if (s.kind == injLogprobs && a.logprobs) || (s.kind == injTokenIDs && a.tokenIDs) {
			continue
		}
		dst = append(dst, body[last:s.start]...)
		dst = append(dst, "null"...)
		last, changed = s.end, true
	}
	return append(dst, body[last:]...), changed
}
