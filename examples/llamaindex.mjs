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

// FORCE=1 (the tokens-mode run): a bounded string, so the random tiny model's
// forced call ends within max_tokens
const expressionSchema = process.env.FORCE ? z.string().max(24) : z.string();

// ForcingOpenAI (FORCE=1, the tokens-mode run): the model must call a tool,
// one at a time (a random model's list of calls runs to max_tokens), unless
// the last message is a tool result (then it answers, and the run ends).
class ForcingOpenAI extends OpenAI {
  chat(params) {
    const last = params.messages?.at(-1);
    if (process.env.FORCE && params.tools?.length && !last?.options?.toolResult) {
      params = { ...params, additionalChatOptions: { ...params.additionalChatOptions, tool_choice: 'required', parallel_tool_calls: false } };
    }
    return super.chat(params);
  }
}

const run = honeRun('llamaindex');
const llm = new ForcingOpenAI({
  model,
  maxTokens,
  maxRetries: 0,
  additionalSessionOptions: { defaultHeaders: run.headers },
});
const calculator = tool({
  name: 'calculator',
  description: 'Evaluate an arithmetic expression.',
  parameters: z.object({ expression: expressionSchema }),
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
  const first = await calc.run(task.question);
  output = text(first);
  // The follow-up runs on the first run's state: its memory holds the whole
  // conversation (the tool call and its result included).
  output = text(await calc.run(task.followUp, { state: first.data.state }));
} catch (e) {
  error = errorText(e);
}
report({ framework: 'llamaindex', session: run.id, reward: reward(output), output, error });
