// A LlamaIndex.TS (`llamaindex`) agent with a calculator tool: the
// `agent()` workflow of `@llamaindex/workflow` over the `@llamaindex/openai`
// LLM. The LLM reads OPENAI_BASE_URL; hone's headers ride on
// `additionalSessionOptions.defaultHeaders` (passed to the OpenAI client it
// builds; that client, openai 5.x pinned by @llamaindex/openai, keeps the
// headers' case).
import { tool } from 'llamaindex';
import { OpenAI } from '@llamaindex/openai';
import { agent } from '@llamaindex/workflow';
import { z } from 'zod';
import { calculate, errorText, honeRun, maxTokens, model, report, reward, task } from './calculator.mjs';

const run = honeRun('llamaindex');
const llm = new OpenAI({
  model,
  maxTokens,
  maxRetries: 0,
  additionalSessionOptions: { defaultHeaders: run.headers },
});
const calculator = tool({
  name: 'calculator',
  description: 'Evaluate an arithmetic expression.',
  parameters: z.object({ expression: z.string() }),
  execute: ({ expression }) => calculate(expression),
});

let output = '';
let error = '';
try {
  const calc = agent({
    llm,
    tools: [calculator],
    systemPrompt: 'Use the calculator for arithmetic, then state the answer.',
    timeout: 120,
  });
  const text = (result) => {
    const content = result.data?.result ?? result.data?.message?.content ?? result.data;
    return typeof content === 'string' ? content : JSON.stringify(content ?? '');
  };
  output = text(await calc.run(task.question));
  const chatHistory = [{ role: 'user', content: task.question }, { role: 'assistant', content: output }];
  output = text(await calc.run(task.followUp, { chatHistory }));
} catch (e) {
  error = errorText(e);
}
report({ framework: 'llamaindex', session: run.id, reward: reward(output), output, error });
