"""An OpenAI-compatible chat stream served by sse-starlette, as Python servers
such as llama-cpp-python's stream their answers: events end with CRLF (its
default separator) and a keep-alive comment (": ping - <time>") comes every
`ping` seconds. peers/sse_starlette_test.go puts hone in front of it.

usage: sse_starlette_engine.py PORT

POST /v1/chat/completions streams two choices: choice 0 says "Hi" and ends,
choice 1 ends; then, after a pause long enough for a ping, the usage chunk
with the system_fingerprint (as vLLM sends it when usage is asked for), and
[DONE].
"""
import asyncio
import json
import sys

import uvicorn
from sse_starlette.sse import EventSourceResponse
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

PING = 0.2


def chunk(choices, **extra):
    return json.dumps({"id": "chatcmpl-sse", "object": "chat.completion.chunk", "created": 1,
                       "model": "sse", "choices": choices, **extra})


async def chat(request):
    await request.json()

    async def events():
        yield {"data": chunk([{"index": 0, "delta": {"role": "assistant", "content": "Hi"}, "logprobs": None,
                               "finish_reason": None, "token_ids": [5]}])}
        yield {"data": chunk([{"index": 0, "delta": {"content": ""}, "logprobs": None, "finish_reason": "stop",
                               "stop_reason": None, "token_ids": []}])}
        yield {"data": chunk([{"index": 1, "delta": {"content": ""}, "logprobs": None, "finish_reason": "length",
                               "stop_reason": None, "token_ids": []}])}
        await asyncio.sleep(3 * PING)
        yield {"data": chunk([], usage={"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
                             system_fingerprint="sse-fp")}
        yield {"data": "[DONE]"}

    return EventSourceResponse(events(), ping=PING)


async def health(request):
    return JSONResponse({})


app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]), Route("/health", health)])

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
