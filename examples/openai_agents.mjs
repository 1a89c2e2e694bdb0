// An OpenAI Agents SDK (`@openai/agents`) agent with a calculator tool,
// unmodified except for its configuration: OPENAI_BASE_URL points at hone,
// and hone's headers ride on the default OpenAI client's `defaultHeaders`
// (the SDK's way to set headers; fetch sends them lowercase).
import OpenAI from 'openai';
import { Agent, run, tool, user, setDefaultOpenAIClient, setOpenAIAPI, setTracingDisabled } from '@openai/agents';
import { z } from 'zod';
import { calculate, errorText, honeRun, maxTokens, model, report, reward, task } from './calculator.mjs';

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
  parameters: z.object({ expression: z.string() }),
  execute: async ({ expression }) => calculate(expression),
});

const agent = new Agent({
  name: 'Calculator',
  instructions: 'Use the calculator for arithmetic, then state the answer.',
  model,
  tools: [calculator],
  modelSettings: { maxTokens },
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
