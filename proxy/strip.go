package proxy

import "slices"

// stripping reports whether any span is one hone injected and the client did
// not ask for, i.e. whether the body needs stripInto at all.
func stripping(spans []injected, a asked) bool {
	return slices.ContainsFunc(spans, func(s injected) bool { return !keeps(s, a) })
}

// keeps reports whether a span stays as the engine wrote it: a field the
// client asked for itself, or a model name hone did not change.
func keeps(s injected, a asked) bool {
	switch s.kind {
	case injModel:
		return a.renamed == nil
	case injLogprobs:
		return a.logprobs
	}
	return a.tokenIDs // token and prompt ids
}

// promptIDSpans returns where the prompt's token ids are in the answer
// (sorted), which the record stores as null: the ids are kept once, as
// PromptIDs, and an agent's prompt of 10^4 tokens would otherwise add ~60 KB
// of digits to every call's record.
func promptIDSpans(spans []injected) [][2]int {
	var out [][2]int
	for _, s := range spans {
		if s.kind == injPromptIDs {
			out = append(out, [2]int{s.start, s.end})
		}
	}
	slices.SortFunc(out, func(x, y [2]int) int { return x[0] - y[0] })
	return out
}

// stripInto appends body to dst with what hone injected and the client did
// not ask for set to null (logprobs, token ids), as the engine writes those
// fields when they are not requested, and the model name the agent sent in
// place of a policy's adapter name. spans are the positions the accumulator
// noted while walking body.
func stripInto(dst, body []byte, spans []injected, a asked) []byte {
	slices.SortFunc(spans, func(x, y injected) int { return x.start - y.start })
	last := 0
	for _, s := range spans {
		if keeps(s, a) {
			continue
		}
		dst = append(dst, body[last:s.start]...)
		if s.kind == injModel {
			dst = append(dst, a.renamed...)
		} else {
			dst = append(dst, "null"...)
		}
		last = s.end
	}
	return append(dst, body[last:]...)
}
