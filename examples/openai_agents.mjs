// An OpenAI Agents SDK (`@openai/agents`) agent with a calculator tool,
// unmodified except for its configuration: OPENAI_BASE_URL points at hone,
// and hone's headers ride on the default OpenAI client's `defaultHeaders`
// (the SDK's way to set headers; fetch sends them lowercase).
import OpenAI from 'openai';
import { Agent, run, tool, user, setDefaultOpenAIClient, setOpenAIAPI, setTracingDisabled } from '@openai/agents';
import { z } from 'zod';
import { calculate, errorText, honeRun, maxTokens, model, report, reward, task } from './calculator.mjs';

// FORCE=1 (the tokens-mode run): a bounded string, so the random tiny model's
// forced call ends within max_tokens
const expressionSchema = process.env.FORCE ? z.string().max(24) : z.string();

const h = honeRun(process.env.AGENTS_API === 'chat_completions' ? 'openai-agents-chat' : 'openai-agents');
setDefaultOpenAIClient(new OpenAI({ defaultHeaders: h.headers, maxRetries: 0 })); // baseURL and key from the environment
// The SDK's default is the Responses API (/v1/responses), which hone
// translates onto the engine's chat completions; AGENTS_API=chat_completions
// runs the same agent over chat completions.
if (process.env.AGENTS_API === 'chat_completions') setOpenAIAPI('chat_completions');
setTracingDisabled(true);

const calculator = tool({
  name: 'calculator',
  description: 'Evaluate an arithmetic expression.',
  parameters: z.object({ expression: expressionSchema }),
  execute: async ({ expression }) => calculate(expression),
});

const agent = new Agent({
  name: 'Calculator',
  instructions: 'Use the calculator for arithmetic, then state the answer.',
  model,
  tools: [calculator],
  // FORCE=1 (the tokens-mode run): a tool call is required until one is made
  // (the SDK resets tool_choice after a tool use), one call at a time (a random
  // model's list of calls runs to max_tokens)
  modelSettings: process.env.FORCE ? { maxTokens, toolChoice: 'required', parallelToolCalls: false } : { maxTokens },
});

let output = '';
let error = '';
try {
  const first = await run(agent, task.question, { maxTurns: 3 });
  output = String(first.finalOutput ?? '');
  const second = await run(agent, [...first.history, user(task.followUp)], { maxTurns: 3 });
  output = String(second.finalOutput ?? '');
} catch (e) {
  error = errorText(e);
}
report({ framework: process.env.AGENTS_API === 'chat_completions' ? 'openai-agents-chat' : 'openai-agents', session: h.id, reward: reward(output), output, error });
