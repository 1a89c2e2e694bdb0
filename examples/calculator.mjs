// Shared by the example agents: the calculator tool's arithmetic, the task,
// its reward rule and the hone headers of a run. Each agent is configured
// only by OPENAI_BASE_URL and OPENAI_API_KEY, plus these headers set through
// its framework's own default-headers option.
import { randomUUID } from 'node:crypto';

// evaluate computes + - * / and parentheses over numbers; anything else throws.
export function evaluate(expression) {
  const src = String(expression).replace(/\s+/g, '');
  let i = 0;
  const peek = () => src[i];
  const number = () => {
    const m = /^\d+(\.\d+)?/.exec(src.slice(i));
    if (!m) throw new Error(`unexpected ${JSON.stringify(peek() ?? 'end')} at ${i}`);
    i += m[0].length;
    return Number(m[0]);
  };
  const atom = () => {
    if (peek() === '-') { i++; return -atom(); }
    if (peek() === '(') {
      i++;
      const v = sum();
      if (peek() !== ')') throw new Error(`missing ) at ${i}`);
      i++;
      return v;
    }
    return number();
  };
  const product = () => {
    let v = atom();
    while (peek() === '*' || peek() === '/') {
      const op = src[i++];
      const w = atom();
      if (op === '/' && w === 0) throw new Error('division by zero');
      v = op === '*' ? v * w : v / w;
    }
    return v;
  };
  const sum = () => {
    let v = product();
    while (peek() === '+' || peek() === '-') {
      const op = src[i++];
      const w = product();
      v = op === '+' ? v + w : v - w;
    }
    return v;
  };
  if (src === '') throw new Error('empty expression');
  const v = sum();
  if (i !== src.length) throw new Error(`unexpected ${JSON.stringify(src[i])} at ${i}`);
  return v;
}

// calculate is the tool body: the result, or an error the model can read.
export function calculate(expression) {
  try {
    return String(evaluate(expression));
  } catch (e) {
    return `error: ${e.message}`;
  }
}

// task is the question and a follow-up turn in the same conversation: every
// agent makes at least two model calls in one session, each carrying the
// commit header.
export const task = {
  question: 'Ann has 6 boxes of 7 pens. How many pens in all?',
  followUp: 'Check it with the calculator and state the answer again.',
  answer: 42,
};

// reward is 1 when the last number of the final output is the answer.
export function reward(output) {
  const nums = String(output ?? '').match(/-?\d+(\.\d+)?/g);
  return nums && Number(nums[nums.length - 1]) === task.answer ? 1 : 0;
}

// honeRun returns this run's hone headers, which each framework sends
// through its own default-headers option on every call: the session (one
// trajectory), its task (the GRPO group), the reward and the commit. hone
// reads them case-insensitively, however the framework spells them (fetch
// lowercases them). The test harness hands the values in through HONE_SESSION,
// HONE_TASK and HONE_REWARD so that it can look for them in the experience; an
// agent that learns its reward only at the end sends it on its last call
// instead, or POSTs it to /v1/feedback on hone's control plane.
export function honeRun(framework) {
  const id = process.env.HONE_SESSION || `${framework}-${randomUUID()}`;
  const taskID = process.env.HONE_TASK || 'calculator';
  const r = process.env.HONE_REWARD ?? '1';
  return {
    id,
    headers: { 'X-Hone-Session': id, 'X-Hone-Task': taskID, 'X-Hone-Reward': r, 'X-Hone-Commit': '1' },
  };
}

// model is the name the agent always uses; hone serves its newest policy
// under it (the test's engine serves "tiny").
export const model = process.env.HONE_MODEL ?? 'tiny';

// maxTokens keeps the tiny CPU model's replies short.
export const maxTokens = Number(process.env.HONE_MAX_TOKENS ?? 48);

// errorText keeps an agent error short for the report: a tiny model may
// exceed the turns or call the tool badly, and the trajectory is still there.
export function errorText(e) {
  return `${e?.name ?? 'Error'}: ${e?.message ?? e}`;
}

// report prints the one JSON line the Go test reads.
export function report(fields) {
  console.log(JSON.stringify(fields));
}
