// The official OpenAI client through hone, configured only by the
// environment (OPENAI_BASE_URL, OPENAI_API_KEY). HONE_EXPECT=stub checks the
// exact fixture content; HONE_EXPECT=engine checks shapes only (the
// embedded engine's tiny model says whatever it says). HONE_SESSION names
// the session that the "hone headers" checks send through the client's
// defaultHeaders (which fetch sends lowercase); the Go test then looks for
// it, its task, tags, reward and commit in what hone recorded.
import OpenAI from "openai";
import assert from "node:assert/strict";

const client = new OpenAI();
const model = process.env.HONE_MODEL || "Qwen/Qwen3-0.6B";
const stub = process.env.HONE_EXPECT === "stub";
const results = [];

async function check(name, fn) {
  try {
    await fn();
    results.push({ name, ok: true });
  } catch (err) {
    results.push({ name, ok: false, err: String(err && err.stack || err) });
  }
}

const tools = [{
  type: "function",
  function: {
    name: "calculator", description: "Evaluate arithmetic",
    parameters: { type: "object", properties: { expression: { type: "string" } }, required: ["expression"] },
  },
}];

await check("chat non-streaming", async () => {
  const { data, response } = await client.chat.completions
    .create({ model, messages: [{ role: "user", content: "Hello!" }], max_tokens: 16 })
    .withResponse();
  assert.equal(data.object, "chat.completion");
  // A string, or null where the (random, for the engine) model wrote only
  // reasoning or a tool call, as vLLM answers then.
  const msg = data.choices[0].message;
  if (msg.content === null) {
    assert.ok(msg.reasoning ?? msg.reasoning_content ?? msg.tool_calls?.length, "null content without reasoning or tool calls");
  } else {
    assert.equal(typeof msg.content, "string");
  }
  assert.equal(data.choices[0].logprobs ?? null, null, "injected logprobs leaked");
  assert.equal(data.prompt_token_ids ?? null, null, "injected prompt_token_ids leaked");
  assert.ok(response.headers.get("x-hone-session"), "no X-Hone-Session");
  assert.ok(response.headers.get("x-hone-call"), "no X-Hone-Call");
  if (stub) assert.equal(data.choices[0].message.content, "Hello! How can I help?");
});

await check("chat streaming", async () => {
  const stream = await client.chat.completions.create({
    model, messages: [{ role: "user", content: "Hello!" }], max_tokens: 16, stream: true,
  });
  let text = "", chunks = 0, finish = null;
  for await (const chunk of stream) {
    assert.ok(chunk.choices.length > 0, "usage-only chunk leaked (not requested)");
    const c = chunk.choices[0];
    assert.equal(c.logprobs ?? null, null, "injected logprobs leaked");
    assert.equal(c.token_ids ?? null, null, "injected token_ids leaked");
    text += c.delta.content ?? "";
    finish = c.finish_reason ?? finish;
    chunks++;
  }
  assert.ok(chunks >= 2, `only ${chunks} chunks`);
  assert.ok(finish, "no finish_reason");
  if (stub) assert.equal(text, "Hello! How can I help?");
});

await check("chat streaming with usage asked", async () => {
  const stream = await client.chat.completions.create({
    model, messages: [{ role: "user", content: "Hello!" }], max_tokens: 8, stream: true,
    stream_options: { include_usage: true },
  });
  let usage = null;
  for await (const chunk of stream) if (chunk.usage) usage = chunk.usage;
  assert.ok(usage && usage.completion_tokens > 0, "usage chunk missing though asked for");
});

await check("tool call", async () => {
  const r = await client.chat.completions.create({
    model, messages: [{ role: "user", content: "What is 17 * 23?" }], tools, max_tokens: 32,
  });
  const m = r.choices[0].message;
  if (stub) {
    assert.equal(r.choices[0].finish_reason, "tool_calls");
    assert.equal(m.tool_calls[0].function.name, "calculator");
    assert.deepEqual(JSON.parse(m.tool_calls[0].function.arguments), { expression: "17 * 23" });
  } else {
    assert.ok(["stop", "length", "tool_calls"].includes(r.choices[0].finish_reason));
  }
});

await check("tool call streaming", async () => {
  const stream = await client.chat.completions.create({
    model, messages: [{ role: "user", content: "What is 17 * 23?" }], tools, max_tokens: 32, stream: true,
  });
  let name = "", args = "";
  for await (const chunk of stream) {
    for (const tc of chunk.choices[0]?.delta?.tool_calls ?? []) {
      name += tc.function?.name ?? "";
      args += tc.function?.arguments ?? "";
    }
  }
  if (stub) {
    assert.equal(name, "calculator");
    assert.deepEqual(JSON.parse(args), { expression: "17 * 23" });
  }
});

await check("models", async () => {
  const list = await client.models.list();
  const ids = [];
  for await (const m of list) ids.push(m.id);
  assert.ok(ids.includes(model), `models ${ids} lack ${model}`);
});

const session = process.env.HONE_SESSION;
if (session) {
  const honeClient = new OpenAI({
    defaultHeaders: {
      "X-Hone-Session": session, "X-Hone-Task": "acceptance-task", "X-Hone-Tags": "js,acceptance",
      "X-Hone-Train": "1", "X-Hone-Reward": "0.5", "X-Hone-Commit": "1",
    },
  });

  await check("hone headers as default headers", async () => {
    const { response } = await honeClient.chat.completions
      .create({ model, messages: [{ role: "user", content: "Hello!" }], max_tokens: 8 })
      .withResponse();
    assert.equal(response.headers.get("x-hone-session"), session, "hone did not take the session header");
    assert.equal(response.headers.get("x-hone-warning"), null, "hone ignored a header");
  });

  await check("hone headers as default headers, streaming", async () => {
    const { data: stream, response } = await honeClient.chat.completions
      .create({ model, messages: [{ role: "user", content: "Hello!" }], max_tokens: 8, stream: true })
      .withResponse();
    for await (const _ of stream) { /* drain */ }
    assert.equal(response.headers.get("x-hone-session"), session, "hone did not take the session header");
  });
}

if (!stub) await check("bad request is an OpenAI error", async () => {
  await assert.rejects(
    client.chat.completions.create({ model, messages: "not a list", max_tokens: 4 }),
    (err) => err instanceof OpenAI.APIError && err.status >= 400 && err.status < 500,
  );
});

console.log(JSON.stringify(results));
process.exit(results.every((r) => r.ok) ? 0 : 1);
