// The official OpenAI client's Responses API through hone, configured only
// by OPENAI_BASE_URL: responses.create and responses.stream with function
// tools over several turns, plain and with previous_response_id.
// HONE_EXPECT=stub checks the fixture's exact tool call; =engine checks
// shapes only (the embedded tiny model says whatever it says).
import OpenAI from "openai";
import assert from "node:assert/strict";

const client = new OpenAI({ defaultHeaders: { "X-Hone-Session": process.env.HONE_SESSION } });
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
  type: "function", name: "calculator", description: "Evaluate arithmetic", strict: false,
  parameters: { type: "object", properties: { expression: { type: "string" } }, required: ["expression"] },
}];

function checkResponse(r) {
  assert.equal(r.object, "response");
  assert.match(r.id, /^resp_/);
  assert.ok(["completed", "incomplete"].includes(r.status), r.status);
  assert.ok(r.usage && r.usage.input_tokens > 0 && r.usage.output_tokens > 0, JSON.stringify(r.usage));
}

function toolCall(r) {
  const call = r.output.find((o) => o.type === "function_call");
  if (stub) {
    assert.ok(call, "no function_call in " + JSON.stringify(r.output));
    assert.equal(call.name, "calculator");
    assert.equal(call.arguments, '{"expression": "17 * 23"}');
  }
  return call;
}

await check("responses.create, previous_response_id", async () => {
  const r1 = await client.responses.create({ model, instructions: "Be brief.", input: "Hello!", max_output_tokens: 16 });
  checkResponse(r1);
  assert.equal(typeof r1.output_text, "string");
  if (stub) assert.equal(r1.output_text, "Hello! How can I help?");
  const r2 = await client.responses.create({ model, input: "And then?", previous_response_id: r1.id, max_output_tokens: 16 });
  checkResponse(r2);
  assert.equal(r2.previous_response_id, r1.id);
});

await check("responses.create with tools, input resent", async () => {
  const input = [{ role: "user", content: "What is 17 * 23?" }];
  const r1 = await client.responses.create({ model, input, tools, tool_choice: "auto", max_output_tokens: 24 });
  checkResponse(r1);
  const call = toolCall(r1);
  const next = [...input, ...r1.output];
  if (call) next.push({ type: "function_call_output", call_id: call.call_id, output: "391" });
  else next.push({ role: "user", content: "Use the calculator." });
  const r2 = await client.responses.create({ model, input: next, tools, max_output_tokens: 24 });
  checkResponse(r2);
});

await check("responses.stream with tools, previous_response_id", async () => {
  const stream = client.responses.stream({ model, input: "What is 17 * 23?", tools, max_output_tokens: 24 });
  let deltas = 0;
  for await (const ev of stream) {
    if (ev.type.endsWith(".delta")) deltas++;
  }
  const r1 = await stream.finalResponse();
  checkResponse(r1);
  assert.ok(deltas > 0, "no delta events");
  const call = toolCall(r1);
  const input = call ? [{ type: "function_call_output", call_id: call.call_id, output: "391" }] : "Go on.";
  const s2 = client.responses.stream({ model, input, previous_response_id: r1.id, tools, max_output_tokens: 24 });
  for await (const _ of s2) { /* drain */ }
  checkResponse(await s2.finalResponse());
});

await check("unknown previous_response_id is a 404", async () => {
  await assert.rejects(client.responses.create({ model, input: "x", previous_response_id: "resp_unknown" }),
    (err) => err.status === 404);
});

console.log(JSON.stringify(results));
