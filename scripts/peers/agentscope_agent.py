"""AgentScope's ReAct agent against hone (peers/agentscope_test.go runs it).

AgentScope 2.x's `Agent` (the ReAct loop that was `ReActAgent` in 1.x) with
its `OpenAIChatModel` pointed at hone's data plane and hone's session and
task headers in `client_kwargs={"default_headers": ...}`, one tool in its
`Toolkit`. The run follows AgentScope's tuner recipe: a workflow function
runs the agent on a task, a judge function turns the task and the agent's
reply into a reward, and the reward goes to hone after the agent replied
(POST /v1/feedback on the control plane), then the session is committed
(POST /v1/commit).

hone serves a random tiny model, which never chooses a tool by itself: a
reasoning middleware (AgentScope's own extension point) makes the first
reasoning step call the tool (tool_choice names it; vLLM enforces it); the
second step is the agent's free answer. The last stdout line is one JSON
object for the Go test.
"""

import argparse
import asyncio
import json
import urllib.request
from typing import Literal

from agentscope.agent import Agent, ReActConfig
from agentscope.credential import OpenAICredential
from agentscope.message import UserMsg
from agentscope.middleware import MiddlewareBase
from agentscope.model import OpenAIChatModel
from agentscope.permission import PermissionMode
from agentscope.state import AgentState
from agentscope.tool import FunctionTool, ToolChoice, Toolkit

from client_bias import whitespace_bias

TOOL_CALLS = []


# Digits (an enum in the tool's schema): a random model fills an unbounded
# integer with digits until max_tokens.
Digit = Literal[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]


def add(a: Digit, b: Digit) -> str:
    """Add two digits.

    Args:
        a (int): The first addend.
        b (int): The second addend.
    """
    TOOL_CALLS.append({"a": a, "b": b})
    return str(a + b)


class FirstStepCallsTool(MiddlewareBase):
    """Forces the first reasoning step of a reply to call `add`."""

    async def on_reasoning(self, agent, input_kwargs, next_handler):
        if agent.state.cur_iter == 0:
            input_kwargs = {**input_kwargs, "tool_choice": ToolChoice(mode="add")}
        async for item in next_handler(**input_kwargs):
            yield item


class StrictToolsModel(OpenAIChatModel):
    """AgentScope's OpenAIChatModel with its tools marked "strict" (OpenAI's
    flag for schema-exact arguments). AgentScope 2.0.4 to 2.0.11 never send it, and
    without it vLLM 0.32 answered the forced call of this random model with
    arguments '"{"' (a JSON string, not the parameters' object): the agent
    then ran no tool."""

    def _format_tools(self, tools, tool_choice):
        tools, choice = super()._format_tools(tools, tool_choice)
        for t in tools or []:
            t["function"]["strict"] = True
            t["function"].get("parameters", {}).setdefault("additionalProperties", False)
        return tools, choice


async def workflow_func(task, base_url, model, session, stream, no_ws):
    """Runs the agent on the task; returns its reply (the tuner's
    WorkflowOutput.response)."""
    chat_model = StrictToolsModel(
        credential=OpenAICredential(api_key="sk-hone-test", base_url=base_url),
        model=model,
        parameters=OpenAIChatModel.Parameters(max_tokens=64, temperature=0),
        stream=stream,
        max_retries=0,
        # Qwen3 without thinking: vLLM enforces the forced tool call only
        # after the reasoning ends, which a random model's never does.
        # And no whitespace-only tokens, which a random model constrained to
        # the call's JSON writes until max_tokens (client_bias.py).
        extra_body={"chat_template_kwargs": {"enable_thinking": False}, "logit_bias": no_ws},
        client_kwargs={
            "default_headers": {"X-Hone-Session": session, "X-Hone-Task": task["id"]},
            "timeout": 120,
        },
    )
    # An unattended run: the tool executes without asking a user (by
    # default AgentScope 2 parks every tool call for confirmation).
    state = AgentState()
    state.permission_context.mode = PermissionMode.BYPASS
    agent = Agent(
        name="calculator",
        system_prompt="You are a calculator. Use the add tool.",
        model=chat_model,
        toolkit=Toolkit(tools=[FunctionTool(add)]),
        middlewares=[FirstStepCallsTool()],
        react_config=ReActConfig(max_iters=3),
        state=state,
    )
    return await agent.reply(UserMsg(name="user", content=task["question"]))


def judge_func(task, response):
    """The reward of a reply (the tuner's JudgeOutput.reward): 1 for the
    right answer, else a small reward for having used the tool."""
    text = response.get_text_content() or ""
    if task["answer"] in text:
        return 1.0
    return 0.25 if TOOL_CALLS else 0.0


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return resp.status, json.loads(resp.read() or b"null")


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", required=True, help="hone's data plane, .../v1")
    ap.add_argument("--control", required=True, help="hone's control plane")
    ap.add_argument("--model", required=True)
    ap.add_argument("--session", required=True)
    ap.add_argument("--task", required=True)
    ap.add_argument("--stream", action="store_true")
    ap.add_argument("--tokenizer", required=True, help="the served model's tokenizer folder")
    args = ap.parse_args()

    task = {"id": args.task, "question": "What is 2 plus 3?", "answer": "5"}
    reply = await workflow_func(task, args.base_url, args.model, args.session, args.stream,
                                whitespace_bias(args.tokenizer))
    reward = judge_func(task, reply)
    fb = post(args.control + "/v1/feedback", {"session": args.session, "reward": reward})
    commit = post(args.control + "/v1/commit", {"session": args.session})
    print(json.dumps({
        "reply": reply.get_text_content() or "",
        "tool_calls": TOOL_CALLS,
        "reward": reward,
        "feedback_status": fb[0],
        "commit_status": commit[0],
    }))


if __name__ == "__main__":
    asyncio.run(main())
