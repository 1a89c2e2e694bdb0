"""Writes responses-coding-40.json: a Codex CLI-shaped Responses request after
40 turns (instructions, its tools, and per turn a reasoning summary, a shell
call and its output), compact as Rust's serde_json writes it. Deterministic."""
import json
import random

rng = random.Random(40)
words = ("the of to and a in is it you that he was for on are with as his they be at one have this from or had by "
         "not word but what some we can out other were all there when up use your how said an each she which do "
         "their time if will way about many then them write would like so these her long make thing see him two").split()


def sentence(n):
    return " ".join(rng.choice(words) for _ in range(n)).capitalize() + "."


def go_line(i):
    kinds = [
        lambda: f'\tif err := s.flush(ctx, "{rng.choice(words)}"); err != nil {{',
        lambda: f'\t\treturn fmt.Errorf("write <{rng.choice(words)}>: %w", err)',
        lambda: "\t}",
        lambda: f"\t{rng.choice(words)} := len(b.msgs) + {rng.randint(0, 99)} // {sentence(6)}",
        lambda: f'func (s *Store) {rng.choice(words).capitalize()}(ctx context.Context, id string) error {{',
    ]
    return f"{i:>6}\t" + rng.choice(kinds)()


instructions = "\n\n".join(
    "## " + sentence(3) + "\n\n" + "\n".join("- " + sentence(rng.randint(8, 20)) for _ in range(6))
    for _ in range(24))

tools = [
    {"type": "function", "name": "shell", "description": "Runs a shell command and returns its output.",
     "strict": False, "parameters": {"type": "object", "properties": {
         "command": {"type": "array", "items": {"type": "string"}, "description": "The command to execute"},
         "workdir": {"type": "string", "description": "The working directory to execute the command in"},
         "timeout_ms": {"type": "number", "description": "The timeout for the command in milliseconds"}},
         "required": ["command"], "additionalProperties": False}},
    {"type": "function", "name": "update_plan", "description": sentence(30), "strict": False,
     "parameters": {"type": "object", "properties": {"explanation": {"type": "string"}, "plan": {
         "type": "array", "items": {"type": "object", "properties": {"step": {"type": "string"}, "status": {
             "type": "string", "description": "One of: pending, in_progress, completed"}},
             "required": ["step", "status"], "additionalProperties": False}}},
         "required": ["plan"], "additionalProperties": False}},
    {"type": "function", "name": "apply_patch", "description": sentence(60), "strict": False,
     "parameters": {"type": "object", "properties": {"input": {"type": "string", "description": sentence(12)}},
                    "required": ["input"], "additionalProperties": False}},
    {"type": "function", "name": "view_image", "description": sentence(10), "strict": False,
     "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"],
                    "additionalProperties": False}},
]

items = [
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text":
        "<environment_context>\n  <cwd>/home/dev/repo</cwd>\n  <approval_policy>on-request</approval_policy>\n"
        "  <sandbox_mode>workspace-write</sandbox_mode>\n  <network_access>restricted</network_access>\n"
        "  <shell>bash</shell>\n</environment_context>"}]},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text":
        "The capture tests fail after the last change; find out why and fix it."}]},
]
for turn in range(40):
    call_id = "call_" + "".join(rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") for _ in range(24))
    path = f"capture/{rng.choice(words)}_{turn}.go"
    start = rng.randint(1, 400)
    items.append({"type": "reasoning", "summary": [{"type": "summary_text", "text": "**" + sentence(3) + "**\n\n" + sentence(25)}],
                  "content": None, "encrypted_content": "gAAAAA" + "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") for _ in range(1200))})
    cmd = ["bash", "-lc", f"sed -n '{start},{start + 30}p' {path}" if turn % 3 else f"rg -n \"{rng.choice(words)}\" capture"]
    items.append({"type": "function_call", "name": "shell",
                  "arguments": json.dumps({"command": cmd, "workdir": "/home/dev/repo", "timeout_ms": 10000}, separators=(",", ":")),
                  "call_id": call_id})
    out = "\n".join(go_line(start + i) for i in range(30))
    items.append({"type": "function_call_output", "call_id": call_id, "output": json.dumps(
        {"output": out, "metadata": {"exit_code": 0, "duration_seconds": round(rng.random() / 5, 1)}}, separators=(",", ":"), ensure_ascii=False)})

req = {"model": "gpt-5-codex", "instructions": instructions, "input": items, "tools": tools, "tool_choice": "auto",
       "parallel_tool_calls": False, "reasoning": {"effort": "medium", "summary": "auto"}, "store": False, "stream": False,
       "include": ["reasoning.encrypted_content"], "prompt_cache_key": "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"}
with open("responses-coding-40.json", "w") as f:
    json.dump(req, f, separators=(",", ":"), ensure_ascii=False)
