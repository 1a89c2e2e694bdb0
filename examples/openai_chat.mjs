// The official OpenAI client (`openai`) with a hand-written tool loop: the
// plainest agent. Configured by OPENAI_BASE_URL / OPENAI_API_KEY; hone's
// headers ride on the client's `defaultHeaders` (sent lowercase by fetch).
import OpenAI from 'openai';
import { calculate, errorText, honeRun, maxTokens, model, report, reward, task } from './calculator.mjs';

const run = honeRun('openai');
const client = new OpenAI({ defaultHeaders: run.headers, maxRetries: 0 });

const tools = [{
  type: 'function',
  function: {
    name: 'calculator',
    description: 'Evaluate an arithmetic expression.',
    parameters: { type: 'object', properties: { expression: { type: 'string' } }, required: ['expression'] },
  },
}];
const messages = [
  { role: 'system', content: 'Use the calculator for arithmetic, then state the answer.' },
  { role: 'user', content: task.question },
];

let calls = 0;

// answer runs the tool loop (at most 3 model calls) and returns the reply.
async function answer() {
  for (let step = 0; step < 3; step++) {
    const r = await client.chat.completions.create({ model, messages, tools, max_tokens: maxTokens });
    calls++;
    const m = r.choices[0].message;
    messages.push(m);
    if (!m.tool_calls?.length) return m.content ?? '';
    for (const tc of m.tool_calls) {
      let expression = '';
      try {
        expression = JSON.parse(tc.function.arguments).expression;
      } catch { /* the model wrote bad JSON: the tool says so */ }
      messages.push({ role: 'tool', tool_call_id: tc.id, content: calculate(expression) });
    }
  }
  return '';
}

let output = '';
let error = '';
try {
  output = await answer();
  messages.push({ role: 'user', content: task.followUp });
  output = await answer();
} catch (e) {
  error = errorText(e);
}
report({ framework: 'openai', session: run.id, calls, reward: reward(output), output, error });
