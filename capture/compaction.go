package capture

import (
	"bytes"
	"strings"
	"unsafe"

	"github.com/cespare/xxhash/v2"
	"github.com/hone-rl/hone/internal/jsonwalk"
	"github.com/tidwall/gjson"
)

// Compaction: an agent whose context fills summarises its conversation (a
// call whose reply is the summary: Claude Code's /compact and auto-compact,
// Codex's local compaction) and goes on from a history that starts over
// with the summary in a user message. Such a call extends no token path of
// the session, yet it is the same task: hone
//   - infers its session from the summary it carries (a line of an earlier
//     reply of the owner's, found by the first summaryWindow bytes of its
//     lines), when no message prefix matches and no header names one;
//   - stitches it as a new path of the session, counted as a compaction, not
//     as drift: the session's trajectories after a compaction are segments
//     of the same task, sharing its reward, and each experience whose first
//     call carries a summary names the summarised call (CompactedFrom).
//
// A line marks a reply when it is at least summaryWindow bytes long and the
// call's request did not contain it (the model wrote it, not quoted it),
// so a shared system prompt never links two conversations.

const (
	summaryWindow     = 64 // bytes of a line's start that mark it
	maxSummaryWindows = 16 // lines marked per reply
	minSummaryReply   = 128
)

// summaryLines calls fn with the first summaryWindow bytes of each line of
// text that long, until fn returns false.
func summaryLines(text string, fn func(w string) bool) {
	for len(text) > 0 {
		line := text
		if i := strings.IndexByte(text, '\n'); i >= 0 {
			line, text = text[:i], text[i+1:]
		} else {
			text = ""
		}
		line = strings.TrimSpace(line)
		if len(line) >= summaryWindow && !fn(line[:summaryWindow]) {
			return
		}
	}
}

// replyMarks returns the marking windows of a choice's reply: lines of its
// text (reasoning left out) that its request did not contain. Replies with
// tool calls or short ones carry no summary.
func replyMarks(req []byte, ch *Choice) []string {
	if len(ch.ToolCalls) > 0 {
		return nil
	}
	text, _ := splitThink(ch.Content)
	if len(text) < minSummaryReply {
		return nil
	}
	var out []string
	var strs []string // the request's strings, decoded once when a line needs them
	summaryLines(text, func(w string) bool {
		if !carries(req, w, &strs) {
			out = append(out, w)
		}
		return len(out) < maxSummaryWindows
	})
	return out
}

// carries reports whether a request's JSON holds the text w in one of its
// strings, however the agent's client escaped it (Go writes <, > and & as
// \u003c..., Python's json.dumps every non-ASCII character as \uXXXX, PHP
// also / as \/; JavaScript and Rust none of them).
//
// Printable ASCII other than those and the two JSON escapes (plain) has one
// spelling, so a w that is all plain is looked for in the raw bytes, and so
// is one plain run of any other w: missing, w is not there. Otherwise (or
// when w has no plain byte: CJK text, say) w is looked for in the
// request's strings, decoded into *strs on first need.
func carries(req []byte, w string, strs *[]string) bool {
	run, all := anchorRun(w)
	if run != "" && !containsRun(req, run) {
		return false
	}
	if all {
		return true
	}
	if *strs == nil {
		*strs = requestStrings(req)
	}
	for _, s := range *strs {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// anchorRun returns a run of w's bytes that every JSON encoder spells as
// they are (printable ASCII but <, >, &, /, \ and "): the first at least
// anchorLen long, else the longest; and whether it is all of w. The first
// is taken because bytes.Index skips ahead by its first byte, and a line's
// start is usually rarer in a prompt than a word's.
func anchorRun(w string) (run string, all bool) {
	start := 0
	for i := 0; i <= len(w); i++ {
		if i < len(w) && plainByte(w[i]) {
			continue
		}
		if i-start > len(run) {
			run = w[start:i]
			if len(run) >= anchorLen {
				break
			}
		}
		start = i + 1
	}
	return run, len(run) == len(w)
}

const anchorLen = 16

// containsRun reports whether req holds run. Its first probeLen bytes are
// looked for first: bytes.Index compares a pattern that short with vector
// instructions, while one as long as a window (64 bytes) goes byte by byte,
// and a Rabin-Karp hash once its first byte matches often (a line starting
// "- " in a prompt of lists). A line the model wrote, the usual case, is
// then rejected at the probe; only a hit is checked in full.
func containsRun(req []byte, run string) bool {
	if len(run) > probeLen && !bytes.Contains(req, []byte(run[:probeLen])) {
		return false
	}
	return bytes.Contains(req, []byte(run))
}

// probeLen is the length of containsRun's first probe: within what
// bytes.Index searches with vector instructions on amd64 and arm64 (up to
// 63 and 32 bytes).
const probeLen = 32

func plainByte(c byte) bool {
	return c >= 0x20 && c <= 0x7e && c != '<' && c != '>' && c != '&' && c != '/' && c != '\\' && c != '"'
}

// requestStrings returns every string value of a JSON body, decoded (views
// of body where nothing is escaped).
func requestStrings(body []byte) []string {
	strs := []string{}
	w := jsonwalk.New(unsafe.String(unsafe.SliceData(body), len(body)))
	var walk func()
	walk = func() {
		switch w.At() {
		case '{', '[':
			w.Each(walk)
		case '"':
			raw, _ := w.Value()
			strs = append(strs, jsonwalk.AsString(raw))
		default:
			w.Skip()
		}
	}
	walk()
	return strs
}

// requestTexts calls fn with the text of each user, system and developer
// message of a chat request, until fn returns false.
func requestTexts(body []byte, fn func(string) bool) {
	gjson.GetBytes(body, "messages").ForEach(func(_, m gjson.Result) bool {
		if summarised(m.Get("role").String()) {
			return fn(canonContent(m.Get("content")))
		}
		return true
	})
}

// summarised reports whether messages of role may carry an agent's summary
// of its conversation (compaction).
func summarised(role string) bool { return role == "user" || role == "system" || role == "developer" }

// registerSummaries remembers the marking windows of c's replies, so that
// a call carrying one (its agent compacted the conversation) joins c's
// session.
func (s *Store) registerSummaries(c *Call, salt uint64) {
	for i := range c.Choices {
		for _, w := range replyMarks(c.Request, &c.Choices[i]) {
			s.summaries.Add(xxhash.Sum64String(w)^salt, c.Session)
		}
	}
}

// summarisedSession returns the session whose reply one of a request's
// texts (requestTexts') carries, if any.
func (s *Store) summarisedSession(texts []string, salt uint64) (id string, ok bool) {
	for _, text := range texts {
		summaryLines(text, func(w string) bool {
			id, ok = s.summaries.Peek(xxhash.Sum64String(w) ^ salt)
			return !ok
		})
		if ok {
			return id, true
		}
	}
	return "", false
}

// compactionOf returns the id of the latest earlier call whose reply c's
// messages carry ("" when none): c continues the session after a
// compaction.
func compactionOf(c *Call, earlier []*Call) string {
	marks := map[string]string{}
	for _, e := range earlier {
		for i := range e.Choices {
			for _, w := range replyMarks(e.Request, &e.Choices[i]) {
				marks[w] = e.ID // later calls overwrite: the latest summary wins
			}
		}
	}
	if len(marks) == 0 {
		return ""
	}
	found := ""
	requestTexts(c.Request, func(text string) bool {
		summaryLines(text, func(w string) bool {
			found = marks[w]
			return found == ""
		})
		return found == ""
	})
	return found
}
