// Package capture stores what the proxy sees and turns it into training
// experiences: the trace schema (Call, Session, Experience), a Badger store
// written by one batching writer behind a bounded queue, session inference,
// selection, the token trie that stitches calls into trajectories, rewards,
// commit, the ready queue, retention and export rows.
//
// # Flow
//
// The proxy calls Admit before going upstream (session id and whether the
// call is captured; no disk I/O) and Record after the response (a
// non-blocking enqueue). An encoder goroutine takes queued calls in batches
// (up to Queue.BatchSize calls, gathered for Queue.BatchDelay after the
// first, so at a steady trickle it wakes once per batch rather than once per
// call) and encodes them; one writer goroutine writes each batch into a
// Badger write batch that commits asynchronously while the next batch is
// prepared. Besides Queue.Size calls, 4 encoded batches can wait for the
// writer. Control
// plane operations (feedback, commit, ack, janitor passes) run on the same
// goroutine after everything queued before them, in Badger transactions that
// are synced before they return, so a feedback for a call the agent has just
// seen always finds it and a 200 means the write survives a crash.
//
// # Sessions
//
// A session is open until X-Hone-Commit, POST /v1/commit, the Trinity
// /commit or Session.IdleTimeout closes it (committed). A committed session
// with a reward builds its trajectories and becomes ready: one experience per
// trie leaf, each with the next ready-queue cursor, written atomically with
// the state change so nothing is queued twice. Acknowledged experiences make
// the session consumed. A committed session without reward after
// Reward.Deadline gets Reward.Default, or is dropped when that is nil.
// A session whose experiences cannot be built when the janitor, the
// deadline or a Trinity /commit closes it (a call that no longer decodes)
// is dropped on its own (closed_by gets ",build-failed"), holding back no
// other (Store.alone).
//
// No call leaves its trajectory silently. A call for a session that is
//
//   - open or committed joins it (a committed one becomes ready when
//     rewarded, with every call it has by then);
//   - ready (experiences queued, not all acknowledged) joins it: the session
//     goes back to committed in the call's batch and its experiences are
//     rebuilt right after: the old ones are withdrawn from the ready queue,
//     the new ones appended with new cursors and Experience.Replaces naming
//     the old. A consumer that already read an old cursor sees the session
//     again, complete. So X-Hone-Commit with a reward on every call (a
//     default header) leaves one experience with every call;
//   - consumed is continued: a new session <root>.2 (then .3, ...) takes the
//     call, with the owner, task, model, tags and run id of the first part
//     (selection follows the id the agent sends, which does not change);
//     Session.ContinuedBy / ContinuationOf link the parts, the root's
//     Latest names the newest, and later calls, feedback and commits that
//     name the old id go to the newest part. Its experiences carry
//     ContinuationOf;
//   - dropped is an orphan: stored, counted in hone_capture_orphan_calls_total
//     and Session.Orphans, never trained on.
//
// A reward (feedback, Trinity, header) for a ready session rebuilds it the
// same way; for a consumed one it is stored and not applied (feedback by
// session id goes to the newest part of a continued session). Header
// commits and rewards are written in the call's own batch; a crash between
// that batch and the building of experiences leaves the session committed
// with a reward, which the next Open builds.
//
// retention.call_ttl must exceed idle_timeout + reward.deadline + 10m (Open
// refuses less, naming the keys). A session older than call_ttl minus that
// sum is closed ("ttl") at its next call, which starts a continuation, so
// no part outlives its first call. A session found with a call missing
// when it is built is dropped (closed_by gets ",calls-expired"), counted in
// hone_capture_expired_sessions_total, never built truncated.
//
// # Ownership
//
// Admission.Owner / Call.Owner is an opaque id of the client key (a hash;
// "" without client keys). A session belongs to the owner of its first call
// (Session.Owner). Admit claims an explicit session id for its owner before
// the call runs (Store.claim: an LRU of claims, the stored session on a
// miss); a call naming a session of another owner is refused
// (Verdict.Refused wraps ErrSessionOwned, counted in
// hone_capture_foreign_feedback_total{source="header",kind="call"}), so the
// id an agent is told is the session its calls, rewards and commits go to.
// A session capture skips has no record: its claim is written as a key of
// its own (O 0 <session>, claims.go) within a janitor tick, so it outlives
// the cache and restarts. A new id's claim is pinned in memory until the
// store holds it (the session record of its first call, or the claim key),
// so a client flooding new ids cannot push it out of the cache while that
// first call runs and take the id (a call the proxy hands back with Abandon,
// or the full queue drops, unpins it at once; any other lapses after an
// hour). Should a claim still be lost before the
// call is written (more than 4096 new ids of one key, or 65536 in all,
// pinned at once), the writer
// never mixes owners: the call goes to the caller's own <id>@<12 hex
// digits of its hash>. Session inference hashes
// are salted per owner, so one client never joins another's conversation by
// its messages. Calls without an owner (no client keys) are checked against
// nothing: every agent is trusted with every session (proxy.listen on
// loopback, or proxy.agents_trust_each_other).
//
// Feedback, Commit, TrinityFeedback and TrinityCommit act for the owner of
// their context (WithOwner; the HTTP routes pass the request context): with
// one, /v1/feedback and /v1/commit answer 403 for a session of another owner
// or of no owner, Trinity /feedback treats other owners' ids as unknown,
// Trinity /commit closes only that owner's sessions. A context without an
// owner (the control plane, the operator's) acts on every session.
//
// # Durability
//
// Calls are written asynchronously: a crash loses the calls of the last
// batches. A call with a Durable channel gets nil once it, its header reward
// and commit and the experiences they made are written and synced (a
// db.Sync for the batch: Badger's SyncWrites is off), or the error that kept
// it from being stored. Control-plane operations return once synced.
//
// Selection is decided once per session at its first call (X-Hone-Train,
// then Selection.Rules, then a hash against Selection.SampleRate); a skipped
// session stores nothing. The hash key is the session id when the agent sent
// one and the hash of the opening messages (through the first user message)
// for inferred sessions, so every turn of a conversation gets one decision.
//
// # Key layout
//
// Keys are a one-byte prefix and NUL-separated parts (ids never contain
// NUL or control characters); integers are 8-byte big-endian so they sort.
//
//	c 0 <call id>                       call record (version byte + binary, see codec.go;   TTL Retention.CallTTL
//	                                    from 16 KiB S2-compressed after the seq: 0x80|version)
//	s 0 <session> 0 <seq u64>           call id: a session's calls in order                  TTL Retention.CallTTL
//	r 0 <response id> 0 <call id>       <session> 0 <call id>: chatcmpl-... to call          TTL Retention.CallTTL
//	                                    (one per call, so calls sharing an agent-chosen id each keep theirs;
//	                                    none for a response id made from its call's id, chatcmpl-<call id>
//	                                    or cmpl-<call id>: the call's own key finds it. Older stores wrote
//	                                    r 0 <response id> alone, last writer winning; still read and deleted)
//	S 0 <session>                       session record (versioned JSON, type Session)
//	x 0 <state> 0 <since u64 ns> 0 <session>   empty: sessions by state and time entered
//	                                           (<state>: o open, c committed, r ready, u consumed, d dropped;
//	                                           m 0 state-index holds the layout version, 2)
//	t 0 <task> 0 <session>              empty: sessions by task (GRPO groups)
//	q 0 <cursor u64>                    ready experience ('z' + zstd-compressed JSON, type Experience)
//	m 0 cursor | m 0 acked              last assigned cursor, ack watermark
//	O 0 <session>                       owner: the claim of a session capture skips (client keys only)
//	                                    TTL idle_timeout (a day when 0) + deadline + 10m, written again by a
//	                                    call once half of it has passed
//
// Values above 1 KiB (call records) live in Badger's value log, keys and
// small values in uncompressed tables (see Open); the janitor runs value-log GC.
// The size cap (Retention.MaxBytes) is checked against Badger's size
// estimate, which Badger refreshes about once a minute.
//
// # Control plane (Store.Routes)
//
//	POST /v1/feedback  {"session"|"call", "reward", "tags", "comment"}   -> {"session","state","reward"}
//	POST /v1/commit    {"session"}                                       -> {"session","state","reward"}
//	POST /feedback     {"msg_ids":[...], "reward", "task_id", "run_id"}  Trinity-RFT; ids/task/run: string or number
//	POST /commit       body ignored; commits every open rewarded session
//	GET  /v1/sessions/{id}                                               session record + per-call summary
//	GET  /v1/experiences?after=CURSOR&limit=N   NDJSON, one Experience per line, flushed per line;
//	                                            without after: from the ack watermark
//	POST /v1/experiences/ack {"cursor": N}      acknowledges every cursor <= N
//
// Errors are OpenAI-style {"error":{"message","type","param","code"}}:
// 400 invalid_request_error, 403 permission_error (a session of another
// owner, see Ownership), 404 not_found_error, 503 when closed.
//
// # Export
//
// Export (hone export) emits Row values: one "trajectory" row per trie leaf
// and one "step" row per call. Column names follow verl: prompt (JSON
// messages before the first completion), response (JSON messages after),
// prompt_ids, responses (token ids after the prompt), input_ids
// (prompt_ids + responses), attention_mask (all 1), loss_mask (over
// input_ids), response_mask (over responses), old_log_probs and versions
// (over responses), rewards (session reward; step rows: the call's reward
// when it has one), plus session, task, model, state, leaf, step, call,
// policy_version, tools, has_reward, drift.
//
// Stored data never holds request headers: the proxy passes bodies only.
package capture
