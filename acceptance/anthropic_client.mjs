// The official Anthropic client (@anthropic-ai/sdk) through hone's Messages
// API, configured only by the environment (ANTHROPIC_BASE_URL: hone's root,
// without /v1, as for api.anthropic.com; ANTHROPIC_API_KEY). messages.create
// and messages.stream with tools over several turns, thinking blocks sent
// back, the raw event stream, countTokens and API-shaped errors.
// HONE_EXPECT=stub checks the vLLM fixtures' exact content; =engine checks
// shapes only (the embedded tiny model says whatever it says). HONE_SESSION
// rides on every call as a default header.
import Anthropic from "@anthropic-ai/sdk";
import assert from "node:assert/strict";

const client = new Anthropic({ defaultHeaders: { "X-Hone-Session": process.env.HONE_SESSION } });
const model = process.env.HONE_MODEL || "Qwen/Qwen3-0.6B";
const stub = process.env.HONE_EXPECT === "stub";
const results = [];

async function check(name, fn) {
  try {
    await fn();
    results.push({ name, ok: true });
  } catch (err) {
    results.push({ name, ok: false, err: String((err && err.stack) || err) });
  }
}

const tools = [{
  name: "calculator", description: "Evaluate arithmetic",
  input_schema: { type: "object", properties: { expression: { type: "string" } }, required: ["expression"] },
}];
const system = "You are a calculator agent. Use the calculator tool.";
const stopReasons = ["end_turn", "max_tokens", "tool_use", "stop_sequence"];

function checkMessage(m) {
  assert.equal(m.type, "message");
  assert.equal(m.role, "assistant");
  assert.match(m.id, /^msg_/);
  assert.equal(m.model, model);
  assert.ok(Array.isArray(m.content), "content not a list");
  assert.ok(stopReasons.includes(m.stop_reason), `stop_reason ${m.stop_reason}`);
  assert.ok(m.usage && m.usage.input_tokens > 0 && m.usage.output_tokens > 0, JSON.stringify(m.usage));
  for (const b of m.content) {
    assert.ok(["text", "thinking", "tool_use"].includes(b.type), `block ${JSON.stringify(b)}`);
    if (b.type === "thinking") assert.ok(typeof b.signature === "string" && b.signature.length > 0, "thinking without signature");
    if (b.type === "tool_use") assert.ok(b.id && typeof b.name === "string" && b.input !== undefined, JSON.stringify(b));
  }
  assert.equal(JSON.stringify(m).includes("token_ids"), false, "injected token ids leaked");
}

// toolUse returns the message's tool_use block; against the engine, whose
// tiny model rarely calls a tool, it adds one to the history so the next
// turns still carry a tool result.
function toolUse(m, history) {
  let use = m.content.find((b) => b.type === "tool_use");
  if (stub) {
    assert.ok(use, "no tool_use in " + JSON.stringify(m.content));
    assert.equal(m.stop_reason, "tool_use");
    assert.equal(use.name, "calculator");
    assert.deepEqual(use.input, { expression: "17 * 23" });
  }
  const content = [...m.content];
  if (!use) {
    use = { type: "tool_use", id: "toolu_local_1", name: "calculator", input: { expression: "17 * 23" } };
    content.unshift({ type: "thinking", thinking: "The calculator knows.", signature: "local" });
    content.push(use);
  }
  history.push({ role: "assistant", content });
  return use;
}

function checkAnswer(m) {
  if (!stub) return;
  assert.deepEqual(m.content.map((b) => b.type), ["thinking", "text"]);
  assert.equal(m.content[0].thinking, "17 times 23 is 391");
  assert.equal(m.content[1].text, "391.");
  assert.equal(m.stop_reason, "end_turn");
}

await check("messages.create", async () => {
  const { data, response } = await client.messages
    .create({ model, system: "Be brief.", messages: [{ role: "user", content: "Hello!" }], max_tokens: 16 })
    .withResponse();
  checkMessage(data);
  assert.ok(response.headers.get("x-hone-call"), "no X-Hone-Call");
  assert.equal(response.headers.get("x-hone-session"), process.env.HONE_SESSION);
  if (stub) {
    assert.deepEqual(data.content, [{ type: "text", text: "Hello! How can I help?" }]);
    assert.equal(data.stop_reason, "end_turn");
    assert.deepEqual([data.usage.input_tokens, data.usage.output_tokens], [10, 7]);
  }
});

await check("messages.create with tools over several turns, thinking blocks sent back", async () => {
  const history = [{ role: "user", content: "What is 17 * 23?" }];
  const r1 = await client.messages.create({ model, system, messages: history, tools, tool_choice: { type: "auto" }, max_tokens: 32 });
  checkMessage(r1);
  const use = toolUse(r1, history);
  history.push({ role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: [{ type: "text", text: "391" }] }] });
  const r2 = await client.messages.create({ model, system, messages: history, tools, max_tokens: 32 });
  checkMessage(r2);
  checkAnswer(r2);
  history.push({ role: "assistant", content: r2.content.length ? r2.content : [{ type: "text", text: "391." }] });
  history.push({ role: "user", content: "And 391 / 17?" });
  const r3 = await client.messages.create({ model, system, messages: history, tools, max_tokens: 32 });
  checkMessage(r3);
  if (stub) assert.equal(r3.stop_reason, "tool_use");
});

await check("messages.stream with tools over several turns, thinking blocks sent back", async () => {
  const history = [{ role: "user", content: "What is 17 * 23?" }];
  let json = 0, thinking = "", text = "";
  const s1 = client.messages.stream({ model, system, messages: history, tools, max_tokens: 32 });
  s1.on("inputJson", () => json++);
  const r1 = await s1.finalMessage();
  checkMessage(r1);
  if (stub) assert.ok(json >= 3, `${json} inputJson events`);
  const use = toolUse(r1, history);
  history.push({ role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "391" }] });
  const s2 = client.messages.stream({ model, system, messages: history, tools, max_tokens: 32 });
  s2.on("thinking", (d) => { thinking += d; });
  s2.on("text", (d) => { text += d; });
  const r2 = await s2.finalMessage();
  checkMessage(r2);
  if (stub) {
    assert.deepEqual(r2.content.map((b) => b.type), ["thinking", "text"]);
    assert.equal(thinking, "17 x 23");
    assert.equal(text, "391.");
    assert.equal(r2.content[0].signature.length > 0, true);
  }
  history.push({ role: "assistant", content: r2.content.length ? r2.content : [{ type: "text", text: "391." }] });
  history.push({ role: "user", content: "And 391 / 17?" });
  const r3 = await client.messages.stream({ model, system, messages: history, tools, max_tokens: 32 }).finalMessage();
  checkMessage(r3);
});

await check("messages.create stream: true (raw events)", async () => {
  const stream = await client.messages.create({
    model, messages: [{ role: "user", content: "Hello!" }], max_tokens: 16, stream: true,
  });
  const types = [];
  let text = "";
  for await (const ev of stream) {
    types.push(ev.type);
    if (ev.type === "content_block_delta" && ev.delta.type === "text_delta") text += ev.delta.text;
  }
  assert.equal(types[0], "message_start");
  assert.equal(types.at(-1), "message_stop");
  assert.equal(types.at(-2), "message_delta");
  if (stub) {
    assert.equal(text, "Hello! How can I help?");
    assert.deepEqual(types.filter((t) => t.startsWith("content_block_")).length, 9);
  }
});

await check("messages.countTokens", async () => {
  const r = await client.messages.countTokens({ model, system, messages: [{ role: "user", content: "What is 17 * 23?" }], tools });
  assert.ok(Number.isInteger(r.input_tokens) && r.input_tokens > 0, JSON.stringify(r));
});

await check("errors in Anthropic's shape", async () => {
  await assert.rejects(
    client.messages.create({
      model, max_tokens: 8,
      messages: [{ role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_unknown", content: "1" }] }],
    }),
    (err) => {
      assert.ok(err instanceof Anthropic.BadRequestError, String(err));
      assert.equal(err.status, 400);
      assert.equal(err.error.type, "error");
      assert.equal(err.error.error.type, "invalid_request_error");
      assert.match(err.error.error.message, /tool_use_id/);
      return true;
    },
  );
  // the SDK checks its parameters only by type: a missing max_tokens reaches hone
  await assert.rejects(client.messages.create({ model, messages: [{ role: "user", content: "hi" }] }),
    (err) => err instanceof Anthropic.BadRequestError && /max_tokens/.test(err.message));
});

console.log(JSON.stringify(results));
