"""AgentScope's ReAct agent as the learner in hone's loop
(peers/agentscope_learn_test.go drives it).

A worker: each stdin line is one round, a JSON list of episodes
({"session", "task", "question", "train", "seed"}); for each, AgentScope 2.x's
`Agent` (the ReAct loop that was `ReActAgent` in 1.x) answers the question
with its `OpenAIChatModel` pointed at hone's data plane, hone's headers in
`client_kwargs={"default_headers": ...}` (X-Hone-Session and X-Hone-Task;
X-Hone-Train: 0 for held-out episodes). A training episode is then judged
and its reward posted to hone's control plane (POST /v1/feedback, then
POST /v1/commit), as AgentScope's tuner recipe does. One stdout line per
round answers it: a JSON list of {"session", "reply", "reward"}.

The task is one a model with random weights can learn within a few GRPO
steps: the reward is the share of digits in the agent's reply. The agent
has no tools (the random model would never call one; its list would only
lengthen every prompt).
"""

import argparse
import asyncio
import json
import sys
import urllib.request

from agentscope.agent import Agent, ReActConfig
from agentscope.credential import OpenAICredential
from agentscope.message import UserMsg
from agentscope.model import OpenAIChatModel
from agentscope.tool import Toolkit


def digit_share(text):
    """The judge: the share of the reply's characters that are digits."""
    return sum(c in "0123456789" for c in text) / len(text) if text else 0.0


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        resp.read()
        return resp.status


async def episode(args, ep):
    headers = {"X-Hone-Session": ep["session"], "X-Hone-Task": ep["task"]}
    if not ep["train"]:
        headers["X-Hone-Train"] = "0"
    model = OpenAIChatModel(
        credential=OpenAICredential(api_key="sk-hone-test", base_url=args.base_url),
        model=args.model,
        parameters=OpenAIChatModel.Parameters(max_tokens=args.max_tokens, temperature=1.0),
        stream=args.stream,
        max_retries=0,
        # The sampling seed makes a round the same every run; Qwen3 without
        # thinking (the template closes an empty think block).
        extra_body={"seed": ep["seed"], "chat_template_kwargs": {"enable_thinking": False}},
        client_kwargs={"default_headers": headers, "timeout": 120},
    )
    agent = Agent(
        name="learner",
        system_prompt="Answer.",
        model=model,
        toolkit=Toolkit(),
        react_config=ReActConfig(max_iters=2),
    )
    reply = await agent.reply(UserMsg(name="user", content=ep["question"]))
    text = reply.get_text_content() or ""
    reward = digit_share(text)
    if ep["train"]:
        await asyncio.to_thread(post, args.control + "/v1/feedback", {"session": ep["session"], "reward": reward})
        await asyncio.to_thread(post, args.control + "/v1/commit", {"session": ep["session"]})
    return {"session": ep["session"], "reply": text, "reward": reward}


async def run_round(args, episodes):
    sem = asyncio.Semaphore(args.concurrency)

    async def one(ep):
        async with sem:
            return await episode(args, ep)

    return await asyncio.gather(*(one(ep) for ep in episodes))


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", required=True, help="hone's data plane, .../v1")
    ap.add_argument("--control", required=True, help="hone's control plane")
    ap.add_argument("--model", required=True)
    ap.add_argument("--max-tokens", type=int, default=6)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--stream", action="store_true")
    args = ap.parse_args()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        results = await run_round(args, json.loads(line))
        print(json.dumps(results), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
