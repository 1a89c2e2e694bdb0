"""Golden structural tags: what vLLM's chat endpoint constrains tool calls with.

For chat requests with tools, vLLM 0.32 (its default
VLLM_ENFORCE_STRICT_TOOL_CALLING, the server's default --tool-strict-level,
the hermes tool parser) puts a structural tag into the request's
structured_outputs for forced calls (tool_choice required or a named
function) and, under auto, when parallel_tool_calls is false or a tool is
strict.
This runs vLLM's own Parser._apply_structural_tag on a set of requests and
writes each request with the tag (or null) to
proxy/continuity/testdata/structural_tag.json; proxy/continuity's TestStructuralTagGolden builds
the same tags. Run from the repository root with the peers' Python:

    ~/.cache/hone/peers/venv/bin/python scripts/peers/structural_tag_golden.py
"""

import json
import sys

import vllm
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.parser.abstract_parser import DelegatingParser
from vllm.tool_parsers.hermes_tool_parser import Hermes2ProToolParser
from vllm.tool_parsers.tool_strict_level import ToolStrictLevel

CALC = {"type": "function", "function": {"name": "calculator", "description": "Evaluate arithmetic",
        "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}}}
STRICT = {"type": "function", "function": {"name": "lookup", "strict": True,
          "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"],
                         "additionalProperties": False}}}
NOPARAMS = {"type": "function", "function": {"name": "now"}}
STRICT_NOPARAMS = {"type": "function", "function": {"name": "ping", "strict": True}}
NOTSTRICT = {"type": "function", "function": {"name": "loose", "strict": False, "parameters": {"type": "object"}}}

REQUESTS = [
    {"tools": [CALC]},
    {"tools": [CALC], "parallel_tool_calls": True},
    {"tools": [CALC], "parallel_tool_calls": False},
    {"tools": [CALC], "tool_choice": "auto", "parallel_tool_calls": False},
    {"tools": [CALC, STRICT]},
    {"tools": [CALC, STRICT], "parallel_tool_calls": False},
    {"tools": [STRICT_NOPARAMS, NOPARAMS], "parallel_tool_calls": False},
    {"tools": [STRICT_NOPARAMS, NOTSTRICT]},
    {"tools": [CALC], "tool_choice": "none", "parallel_tool_calls": False},
    {"tools": [{"type": "function", "function": {"name": "odd \"name\"", "strict": True, "parameters": {}}}]},
    # forced calls: vLLM's hermes parser constrains them with a tag too
    {"tools": [CALC, STRICT], "tool_choice": "required"},
    {"tools": [CALC, STRICT], "tool_choice": "required", "parallel_tool_calls": False},
    {"tools": [CALC, STRICT], "tool_choice": {"type": "function", "function": {"name": "lookup"}}},
    {"tools": [CALC, STRICT], "tool_choice": {"type": "function", "function": {"name": "calculator"}},
     "parallel_tool_calls": False},
]


def tag_for(body):
    parser = object.__new__(DelegatingParser)
    parser._reasoning_parser = None
    parser._tool_parser = object.__new__(Hermes2ProToolParser)
    parser.tool_strict_level = ToolStrictLevel.AUTO
    req = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "hi"}], **body)
    req = parser._apply_structural_tag(req)
    so = req.structured_outputs
    return json.loads(so.structural_tag) if so is not None and so.structural_tag else None


def main():
    out = [{"request": body, "structural_tag": tag_for(body)} for body in REQUESTS]
    path = sys.argv[1] if len(sys.argv) > 1 else "proxy/continuity/testdata/structural_tag.json"
    with open(path, "w") as f:
        f.write('{"vllm": %s, "cases": [\n' % json.dumps(vllm.__version__))
        f.write(",\n".join(json.dumps(c, ensure_ascii=False) for c in out))
        f.write("\n]}\n")


if __name__ == "__main__":
    main()
