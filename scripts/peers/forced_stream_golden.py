"""Golden deltas of vLLM's streamed forced tool calls.

Runs vLLM's own streaming extraction for tool_choice "required"
(extract_required_tool_call_streaming) and a named function
(extract_named_tool_call_streaming) on constrained outputs split into engine
steps, and writes what each step emits to proxy/testdata/forced_stream.json.
proxy's TestForcedStreamGolden replays the same steps through hone's
forcedStream. Run from the repository root with the peers' Python:

    ~/.cache/hone/peers/venv/bin/python scripts/peers/forced_stream_golden.py
"""

import json
import sys

import vllm
from vllm.tool_parsers.streaming import (
    extract_named_tool_call_streaming,
    extract_required_tool_call_streaming,
)

REQUIRED = [
    '[{"name": "calc", "parameters": {"a": 6, "b": 7}}]',
    '[{"name": "calc", "parameters": {"s": "a}]\\"{[", "n": [1, {"x": null}]}}, {"name": "other", "parameters": {}}]',
    '[{"parameters": {"a": 1}, "name": "calc"}]',
    '[{"name": "ca\\u006cc", "parameters": {"e": "\u00e9"}}]',
    '[{"name": "calc", "parameters": null}, {"name": "f", "parameters": 3}]',
    '[ { "name" : "calc" , "parameters" : { "a" : 1 } } ]  trailing [{"name": "x", "parameters": {}}]',
    '[{"name": "calc", "parameters": {"a": 6}}, {"name": "calc", "parameters": {"a": 7}}, {"name": "calc", "parameters": {"a": 8}}]',
]
NAMED = ['{"a": 6, "b": 7}', '\n\n{"expression":  "391"}']


def splits(text):
    """The text split into steps: one step, every 1, 3 and 7 characters."""
    yield "whole", [text]
    for n in (1, 3, 7):
        yield f"by{n}", [text[i : i + n] for i in range(0, len(text), n)]


def deltas(message):
    if message is None:
        return []
    out = []
    for tc in message.tool_calls or []:
        fn = tc.function
        out.append(
            {
                "index": tc.index,
                "id": tc.id is not None,
                "type": tc.type,
                "name": fn.name if fn else None,
                "arguments": fn.arguments if fn else None,
            }
        )
    return out


def required_case(text, steps):
    prev, out = "", []
    for step in steps:
        cur = prev + step
        msg, _ = extract_required_tool_call_streaming(
            previous_text=prev, current_text=cur, tool_call_idx=None, tool_call_id_type="random"
        )
        out.append({"text": step, "deltas": deltas(msg)})
        prev = cur
    return out


def named_case(text, steps):
    returned, out = False, []
    for step in steps:
        msg, returned = extract_named_tool_call_streaming(
            delta_text=step,
            function_name="calc",
            function_name_returned=returned,
            tool_call_idx=None,
            tool_call_id_type="random",
            tokenizer=None,
        )
        out.append({"text": step, "deltas": deltas(msg)})
    return out


def main():
    cases = []
    for text in REQUIRED:
        for how, steps in splits(text):
            cases.append({"kind": "required", "split": how, "steps": required_case(text, steps)})
    for text in NAMED:
        for how, steps in splits(text):
            cases.append({"kind": "named", "split": how, "steps": named_case(text, steps)})
    doc = {"vllm": vllm.__version__, "cases": cases}
    path = sys.argv[1] if len(sys.argv) > 1 else "proxy/testdata/forced_stream.json"
    with open(path, "w") as f:  # one case a line
        f.write('{"vllm": %s, "cases": [\n' % json.dumps(doc["vllm"]))
        f.write(",\n".join(json.dumps(c, ensure_ascii=False) for c in cases))
        f.write("\n]}\n")


if __name__ == "__main__":
    main()
