// A LangGraph.js (`@langchain/langgraph`) ReAct agent with a calculator
// tool, built as a StateGraph: a model node (`@langchain/openai` ChatOpenAI
// with the tool bound) and a ToolNode, looping while the model calls tools.
// ChatOpenAI reads OPENAI_BASE_URL; hone's headers ride on its
// `configuration.defaultHeaders` (the OpenAI client's option; fetch sends
// them lowercase).
import { ChatOpenAI } from '@langchain/openai';
import { tool } from '@langchain/core/tools';
import { END, MessagesAnnotation, START, StateGraph } from '@langchain/langgraph';
import { ToolNode, toolsCondition } from '@langchain/langgraph/prebuilt';
import { z } from 'zod';
import { calculate, errorText, honeRun, maxTokens, model, report, reward, task } from './calculator.mjs';

// FORCE=1 (the tokens-mode run): a bounded string, so the random tiny model's
// forced call ends within max_tokens
const expressionSchema = process.env.FORCE ? z.string().max(24) : z.string();

const run = honeRun('langgraph');
const calculator = tool(async ({ expression }) => calculate(expression), {
  name: 'calculator',
  description: 'Evaluate an arithmetic expression.',
  schema: z.object({ expression: expressionSchema }),
});
const chat = new ChatOpenAI({
  model,
  maxTokens,
  maxRetries: 0,
  configuration: { defaultHeaders: run.headers },
});
const llm = chat.bindTools([calculator]);
// FORCE=1 (the tokens-mode run): the model must call a tool, one at a time (a
// random model's list of calls runs to max_tokens), unless it just got a
// tool's result
const forced = chat.bindTools([calculator], { tool_choice: 'required', parallel_tool_calls: false });
const pick = (messages) => {
  const last = messages[messages.length - 1];
  const kind = last?.getType?.() ?? last?._getType?.();
  return process.env.FORCE && kind !== 'tool' ? forced : llm;
};

const graph = new StateGraph(MessagesAnnotation)
  .addNode('agent', async (state) => ({ messages: [await pick(state.messages).invoke(state.messages)] }))
  .addNode('tools', new ToolNode([calculator]))
  .addEdge(START, 'agent')
  .addConditionalEdges('agent', toolsCondition, ['tools', END])
  .addEdge('tools', 'agent')
  .compile();

let output = '';
let error = '';
try {
  const first = await graph.invoke({
    messages: [
      { role: 'system', content: 'Use the calculator for arithmetic, then state the answer.' },
      { role: 'user', content: task.question },
    ],
  }, { recursionLimit: 6 });
  const result = await graph.invoke({
    messages: [...first.messages, { role: 'user', content: task.followUp }],
  }, { recursionLimit: 6 });
  const last = result.messages[result.messages.length - 1];
  output = typeof last.content === 'string' ? last.content : JSON.stringify(last.content);
} catch (e) {
  error = errorText(e);
}
report({ framework: 'langgraph', session: run.id, reward: reward(output), output, error });
