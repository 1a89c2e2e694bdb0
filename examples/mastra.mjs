// A Mastra (`@mastra/core`) agent with a calculator tool. Mastra's model
// router takes an OpenAI-compatible endpoint as a model config: `url`
// (OPENAI_BASE_URL), `apiKey` and `headers`, where hone's headers ride (sent
// lowercase by fetch). With a `url` Mastra speaks chat completions.
import { Agent } from '@mastra/core/agent';
import { createTool } from '@mastra/core/tools';
import { z } from 'zod';
import { calculate, errorText, honeRun, maxTokens, model, report, reward, task } from './calculator.mjs';

// FORCE=1 (the tokens-mode run): a bounded string, so the random tiny model's
// forced call ends within max_tokens
const expressionSchema = process.env.FORCE ? z.string().max(24) : z.string();

const run = honeRun('mastra');
const calculator = createTool({
  id: 'calculator',
  description: 'Evaluate an arithmetic expression.',
  inputSchema: z.object({ expression: expressionSchema }),
  execute: async ({ expression }) => calculate(expression),
});

const agent = new Agent({
  id: 'calculator-agent',
  name: 'Calculator',
  instructions: 'Use the calculator for arithmetic, then state the answer.',
  model: {
    providerId: 'hone',
    modelId: model,
    url: process.env.OPENAI_BASE_URL,
    apiKey: process.env.OPENAI_API_KEY,
    headers: run.headers,
  },
  tools: { calculator },
});

let output = '';
let error = '';
let calls = 0;
try {
  const options = {
    maxSteps: 3,
    modelSettings: { maxOutputTokens: maxTokens, maxRetries: 0 },
    // FORCE=1 (the tokens-mode run): the first step of each run must call a
    // tool, one at a time (a random model's list of calls runs to max_tokens)
    prepareStep: ({ stepNumber }) => (process.env.FORCE && stepNumber === 0
      ? { toolChoice: 'required', providerOptions: { hone: { parallel_tool_calls: false } } }
      : undefined),
  };
  const first = await agent.generate(task.question, options);
  calls += first.steps?.length ?? 0;
  output = first.text ?? '';
  // No memory store is configured: the follow-up carries the conversation,
  // the first run's every step included (response.messages: its tool call,
  // the tool's result and the answer), as memory would.
  const second = await agent.generate([
    { role: 'user', content: task.question },
    ...first.response.messages,
    { role: 'user', content: task.followUp },
  ], options);
  calls += second.steps?.length ?? 0;
  output = second.text ?? '';
  if (first.error || second.error) error = errorText(first.error ?? second.error);
} catch (e) {
  error = errorText(e);
}
report({ framework: 'mastra', session: run.id, calls, reward: reward(output), output, error });
