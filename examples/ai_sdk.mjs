// A Vercel AI SDK (`ai`) agent over `@ai-sdk/openai-compatible` with a
// calculator tool: generateText's tool loop. The provider is pointed at
// OPENAI_BASE_URL; hone's headers ride on the provider's `headers` option
// (sent lowercase by fetch). AI_SDK_PROVIDER=responses runs it over
// `@ai-sdk/openai`'s default model, the Responses API with store on, which
// sends the first run's answers back as item references in the second.
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateText, stepCountIs, tool } from 'ai';
import { z } from 'zod';
import { calculate, errorText, honeRun, maxTokens, model, report, reward, task } from './calculator.mjs';

// FORCE=1 (the tokens-mode run): a bounded string, so the random tiny model's
// forced call ends within max_tokens
const expressionSchema = process.env.FORCE ? z.string().max(24) : z.string();

const responses = process.env.AI_SDK_PROVIDER === 'responses';
const run = honeRun(responses ? 'ai-sdk-responses' : 'ai-sdk');
const options = { baseURL: process.env.OPENAI_BASE_URL, apiKey: process.env.OPENAI_API_KEY, headers: run.headers };
const languageModel = responses
  ? createOpenAI(options)(model)
  : createOpenAICompatible({ name: 'hone', ...options }).chatModel(model);

const calculator = tool({
  description: 'Evaluate an arithmetic expression.',
  inputSchema: z.object({ expression: expressionSchema }),
  execute: async ({ expression }) => calculate(expression),
});

let output = '';
let error = '';
let calls = 0;
const settings = {
  model: languageModel,
  system: 'Use the calculator for arithmetic, then state the answer.',
  tools: { calculator },
  stopWhen: stepCountIs(3),
  // FORCE=1 (the tokens-mode run): the first step of each run must call a
  // tool, one at a time (a random model's list of calls runs to max_tokens)
  prepareStep: ({ stepNumber }) => (process.env.FORCE && stepNumber === 0
    ? { toolChoice: 'required', providerOptions: { hone: { parallel_tool_calls: false }, openai: { parallelToolCalls: false } } }
    : undefined),
  maxOutputTokens: maxTokens,
  maxRetries: 0,
};
try {
  const messages = [{ role: 'user', content: task.question }];
  const first = await generateText({ ...settings, messages });
  calls += first.steps.length;
  output = first.text;
  // responseMessages: every step's messages (the AI SDK 7 `response.messages`
  // is the last step's only, which would drop the run's tool call and result)
  messages.push(...first.responseMessages, { role: 'user', content: task.followUp });
  const second = await generateText({ ...settings, messages });
  calls += second.steps.length;
  output = second.text;
} catch (e) {
  error = errorText(e);
}
report({ framework: responses ? 'ai-sdk-responses' : 'ai-sdk', session: run.id, calls, reward: reward(output), output, error });
