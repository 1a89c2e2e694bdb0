// The OpenAI Agents SDK (@openai/agents) through hone, configured only by
// OPENAI_BASE_URL and OPENAI_API_KEY: an agent with two function tools in
// the SDK's default model, the Responses API. It writes a file and reads it
// back (the scripted engine decides the calls) and prints the final output.
// AGENT_CHAIN=1: a first run ("Say ready.") and then the task continuing it
// by previous_response_id, so every model call of the task names the
// previous response (the SDK sends only the new items). AGENT_HOOK: a URL
// fetched after the file is written, before the tool returns (the test
// restarts hone there).
import { Agent, run, tool, setTracingDisabled } from "@openai/agents";
import fs from "node:fs";
import path from "node:path";

setTracingDisabled(true); // no trace export to OpenAI
const dir = process.env.AGENT_WORK;

const writeFile = tool({
  name: "write_file",
  description: "Write text into a file of the working directory.",
  parameters: {
    type: "object", additionalProperties: false, required: ["path", "content"],
    properties: { path: { type: "string" }, content: { type: "string" } },
  },
  strict: true,
  execute: async ({ path: p, content }) => {
    fs.writeFileSync(path.join(dir, p), content);
    if (process.env.AGENT_HOOK) {
      const r = await fetch(process.env.AGENT_HOOK);
      if (!r.ok) throw new Error(`hook: HTTP ${r.status}`);
    }
    return `wrote ${content.length} bytes to ${p}`;
  },
});

const readFile = tool({
  name: "read_file",
  description: "Read a file of the working directory.",
  parameters: {
    type: "object", additionalProperties: false, required: ["path"],
    properties: { path: { type: "string" } },
  },
  strict: true,
  execute: async ({ path: p }) => fs.readFileSync(path.join(dir, p), "utf8"),
});

const agent = new Agent({
  name: "files",
  instructions: "You write and read files with your tools.",
  model: process.env.HONE_MODEL,
  tools: [writeFile, readFile],
});

let previousResponseId;
if (process.env.AGENT_CHAIN === "1") {
  const first = await run(agent, "Say ready.");
  console.log(`first: ${first.finalOutput}`);
  previousResponseId = first.lastResponseId;
}
const result = await run(agent, process.env.AGENT_PROMPT, { previousResponseId });
console.log(result.finalOutput);
