// A Vercel AI SDK (`ai`) agent over `@ai-sdk/openai-compatible` with a
// calculator tool: generateText's tool loop. The provider is pointed at
// OPENAI_BASE_URL; hone's headers ride on the provider's `headers` option
// (sent lowercase by fetch).
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateText, stepCountIs, tool } from 'ai';
import { z } from 'zod';
import { calculate, errorText, honeRun, maxTokens, model, report, reward, task } from './calculator.mjs';

const run = honeRun('ai-sdk');
const hone = createOpenAICompatible({
  name: 'hone',
  baseURL: process.env.OPENAI_BASE_URL,
  apiKey: process.env.OPENAI_API_KEY,
  headers: run.headers,
});

const calculator = tool({
  description: 'Evaluate an arithmetic expression.',
  inputSchema: z.object({ expression: z.string() }),
  execute: async ({ expression }) => calculate(expression),
});

let output = '';
let error = '';
let calls = 0;
const settings = {
  model: hone.chatModel(model),
  system: 'Use the calculator for arithmetic, then state the answer.',
  tools: { calculator },
  stopWhen: stepCountIs(3),
  maxOutputTokens: maxTokens,
  maxRetries: 0,
};
try {
  const messages = [{ role: 'user', content: task.question }];
  const first = await generateText({ ...settings, messages });
  calls += first.steps.length;
  output = first.text;
  messages.push(...first.response.messages, { role: 'user', content: task.followUp });
  const second = await generateText({ ...settings, messages });
  calls += second.steps.length;
  output = second.text;
} catch (e) {
  error = errorText(e);
}
report({ framework: 'ai-sdk', session: run.id, calls, reward: reward(output), output, error });
