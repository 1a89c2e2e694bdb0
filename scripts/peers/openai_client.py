"""The openai Python client against hone (peers/clients_test.go runs it).

One session of four calls through hone, with hone's headers as the client's
default_headers (sent on every call): a chat, a streamed follow-up, a forced
tool call (tool_choice names the function; vLLM enforces it with structured
outputs, so a random model makes a valid call) that the client parses, and
the answer to the tool's result. It checks what the client itself can see
(no logprobs or token ids it did not ask for, no usage-only chunk) and
prints, on its last line, one JSON object: per call the response id, hone's
response headers, the content and the tool call, for the Go test to check
against hone's control plane.
"""

import argparse
import json
import sys

import openai

from client_bias import whitespace_bias

TOOLS = [{
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers.",
        # strict: without it vLLM 0.32 answered this random model's forced
        # call with arguments '"{"' (a JSON string, not the parameters'
        # object), as if only "some JSON" was enforced.
        "strict": True,
        "parameters": {
            "type": "object",
            # Digits: a random model fills an unbounded integer with digits
            # until max_tokens.
            "properties": {"a": {"type": "integer", "enum": list(range(10))},
                           "b": {"type": "integer", "enum": list(range(10))}},
            "required": ["a", "b"],
            "additionalProperties": False,
        },
    },
}]


# Qwen3 without thinking: vLLM enforces a forced tool call only after the
# reasoning ends, which a random model's reasoning never does.
NO_THINK = {"chat_template_kwargs": {"enable_thinking": False}}


def hone_headers(headers):
    return {
        "session": headers.get("x-hone-session", ""),
        "call": headers.get("x-hone-call", ""),
        "policy": headers.get("x-hone-policy", ""),
    }


def text_of(kind, msg):
    """The message's text: its content, or (vLLM's qwen3 reasoning parser
    takes a reply without </think> for reasoning) its reasoning."""
    extra = msg.model_extra or {}
    for v in (msg.content, extra.get("reasoning"), extra.get("reasoning_content")):
        if isinstance(v, str):
            return v
    sys.exit(f"{kind}: neither content nor reasoning in {msg}")


def check_clean(kind, obj):
    """hone strips what it injected: the client never asked for logprobs
    or token ids, so they are absent or null as vLLM writes them."""
    extra = obj.model_extra or {}
    if extra.get("prompt_token_ids") is not None:
        sys.exit(f"{kind}: prompt_token_ids reached the client")
    for ch in obj.choices:
        if ch.logprobs is not None:
            sys.exit(f"{kind}: logprobs reached the client: {ch.logprobs}")
        if (ch.model_extra or {}).get("token_ids") is not None:
            sys.exit(f"{kind}: token_ids reached the client")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base-url", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--session", required=True)
    ap.add_argument("--task", required=True)
    ap.add_argument("--reward", required=True)
    ap.add_argument("--tokenizer", required=True, help="the served model's tokenizer folder")
    args = ap.parse_args()
    no_ws = whitespace_bias(args.tokenizer)

    client = openai.OpenAI(
        base_url=args.base_url,
        api_key="sk-hone-test",  # hone passes it on; vLLM here checks none
        max_retries=0,
        timeout=120,
        default_headers={
            "X-Hone-Session": args.session,
            "X-Hone-Task": args.task,
            "X-Hone-Reward": args.reward,
            "X-Hone-Commit": "1",
        },
    )
    calls = []
    messages = [
        {"role": "system", "content": "You are a calculator."},
        {"role": "user", "content": "What is 6 times 7?"},
    ]

    # 1. chat
    raw = client.chat.completions.with_raw_response.create(
        model=args.model, messages=messages, max_tokens=12, temperature=0)
    chat = raw.parse()
    check_clean("chat", chat)
    text = text_of("chat", chat.choices[0].message)
    calls.append({"kind": "chat", "id": chat.id, **hone_headers(raw.headers),
                  "content": text, "finish": chat.choices[0].finish_reason})
    messages += [{"role": "assistant", "content": text},
                 {"role": "user", "content": "Say it again."}]

    # 2. stream
    stream = client.chat.completions.create(
        model=args.model, messages=messages, max_tokens=12, temperature=0, stream=True)
    text, chunks, finish, sid = "", 0, None, None
    for chunk in stream:
        chunks += 1
        sid = chunk.id
        if not chunk.choices:
            sys.exit(f"stream: a chunk without choices (usage-only?): {chunk}")
        check_clean("stream", chunk)
        delta = chunk.choices[0].delta
        extra = delta.model_extra or {}
        text += delta.content or extra.get("reasoning") or extra.get("reasoning_content") or ""
        finish = chunk.choices[0].finish_reason or finish
    calls.append({"kind": "stream", "id": sid, **hone_headers(stream.response.headers),
                  "content": text, "finish": finish, "chunks": chunks})
    messages.append({"role": "assistant", "content": text})
    messages.append({"role": "user", "content": "Now add 2 and 3 with the tool."})

    # 3. forced tool call
    raw = client.chat.completions.with_raw_response.create(
        model=args.model, messages=messages, tools=TOOLS, max_tokens=64, temperature=0,
        tool_choice={"type": "function", "function": {"name": "add"}}, logit_bias=no_ws, extra_body=NO_THINK)
    tc = raw.parse()
    check_clean("tool_call", tc)
    msg = tc.choices[0].message
    if not msg.tool_calls:
        sys.exit(f"tool_call: no tool call in {tc}")
    call = msg.tool_calls[0]
    parsed = json.loads(call.function.arguments)  # the client hands the agent valid JSON
    if not isinstance(parsed, dict):
        sys.exit(f"tool_call: arguments {call.function.arguments!r}")
    calls.append({"kind": "tool_call", "id": tc.id, **hone_headers(raw.headers),
                  "finish": tc.choices[0].finish_reason, "tool_name": call.function.name,
                  "tool_args": call.function.arguments})
    messages.append({"role": "assistant", "content": msg.content, "tool_calls": [call.model_dump()]})
    a, b = parsed.get("a", 0), parsed.get("b", 0)
    result = a + b if isinstance(a, int) and isinstance(b, int) else "error: not integers"
    messages.append({"role": "tool", "tool_call_id": call.id, "content": str(result)})

    # 4. the answer to the tool's result
    raw = client.chat.completions.with_raw_response.create(
        model=args.model, messages=messages, tools=TOOLS, max_tokens=12, temperature=0, extra_body=NO_THINK)
    final = raw.parse()
    check_clean("tool_result", final)
    calls.append({"kind": "tool_result", "id": final.id, **hone_headers(raw.headers),
                  "content": text_of("tool_result", final.choices[0].message),
                  "finish": final.choices[0].finish_reason})

    print(json.dumps({"openai": openai.__version__, "calls": calls}))


if __name__ == "__main__":
    main()
