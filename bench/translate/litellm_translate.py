"""Times LiteLLM's translation of the coding-agent requests in
testdata/requests to a chat completions request: the JSON bytes in, the
engine request's JSON bytes out (json.loads, LiteLLM's translation,
json.dumps), one thread, as BenchmarkTranslate* in proxy/ times hone's.

usage: python litellm_translate.py <repo root> [seconds per request]"""
import json
import sys
import time

import litellm
from litellm.llms.anthropic.messages.adapters.transformation import LiteLLMAnthropicMessagesAdapter
from litellm.responses.litellm_completion_transformation.transformation import LiteLLMCompletionResponsesConfig


def messages(raw, adapter=LiteLLMAnthropicMessagesAdapter()):
    req = json.loads(raw)
    out, _ = adapter.translate_anthropic_to_openai(req)
    return json.dumps(out)


def responses(raw):
    req = json.loads(raw)
    params = {k: v for k, v in req.items() if k not in ("model", "input", "stream")}
    out = LiteLLMCompletionResponsesConfig.transform_responses_api_request_to_chat_completion_request(
        model="hosted_vllm/" + req["model"], input=req["input"], responses_api_request=params,
        custom_llm_provider="hosted_vllm", stream=req.get("stream"))
    return json.dumps(out, default=str)


def bench(fn, raw, seconds):
    fn(raw)  # warm up (imports, caches)
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        fn(raw)
        n += 1
    return (time.perf_counter() - start) / n * 1e6, n


def main():
    root = sys.argv[1]
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 5
    version = getattr(litellm, "__version__", None)
    if version is None:
        from importlib.metadata import version as v
        version = v("litellm")
    for name, fn, path in [("messages", messages, "messages-coding-40.json"),
                           ("responses", responses, "responses-coding-40.json")]:
        with open(f"{root}/testdata/requests/{path}", "rb") as f:
            raw = f.read()
        us, n = bench(fn, raw, seconds)
        out = fn(raw)
        print(f"litellm {version} {name}: {us:.0f} us a request ({n} runs), {len(raw)} bytes in, {len(out)} out")


if __name__ == "__main__":
    main()
