"""Reads hone's exports the way their consumers do (peers/exports_test.go).

- Parquet with pyarrow, checked against the column types verl's RL datasets
  expect: `prompt` a list of {role, content} messages (RLHFDataset hands
  row["prompt"] to the chat template; MultiTurnSFTDataset reads a list of
  message dicts the same way), token columns lists of integers, `rewards` a
  float. Each row is then taken as verl takes it (Arrow -> Python objects,
  as HF datasets' rows are) and its prompt, with the row's tools, rendered by
  transformers' apply_chat_template with the model's own tokenizer and chat
  template: for a step row that must give back exactly the prompt token ids
  hone recorded from the engine.
- JSONL with pandas (read_json lines=True), compared with the Parquet read
  by pandas (read_parquet): same rows, same values.

Exits non-zero naming the first difference; prints one JSON summary line.
"""

import argparse
import json
import math
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from transformers import AutoTokenizer

INT_LISTS = ["prompt_ids", "responses", "input_ids", "attention_mask", "loss_mask", "response_mask"]


def fail(msg):
    sys.exit("read_export: " + msg)


def check_schema(schema):
    def want(name, pred, what):
        if name not in schema.names:
            fail(f"parquet has no column {name!r}")
        t = schema.field(name).type
        if not pred(t):
            fail(f"parquet column {name!r} is {t}, verl expects {what}")

    for col in ("prompt", "response"):
        want(col, lambda t: pa.types.is_list(t) and pa.types.is_struct(t.value_type)
             and pa.types.is_string(t.value_type.field("role").type)
             and pa.types.is_string(t.value_type.field("content").type),
             "a list of {role: string, content: string} messages")
    for col in INT_LISTS:
        want(col, lambda t: pa.types.is_list(t) and pa.types.is_integer(t.value_type), "a list of integers")
    want("old_log_probs", lambda t: pa.types.is_list(t) and pa.types.is_floating(t.value_type), "a list of floats")
    want("rewards", pa.types.is_floating, "a float")
    want("has_reward", pa.types.is_boolean, "a bool")
    want("tools", pa.types.is_string, "JSON text")


def as_ids(x):
    """apply_chat_template(tokenize=True) gives a list, or (transformers 5)
    a BatchEncoding."""
    if hasattr(x, "keys") and "input_ids" in x.keys():
        x = x["input_ids"]
    return [int(i) for i in x]


def render(tok, messages, tools):
    """The prompt ids verl's dataset gets from a row: the chat template over
    row["prompt"] with the generation prompt, as the engine rendered it (the
    agent may have asked vLLM for Qwen3's non-thinking prompt)."""
    out = []
    for kwargs in ({}, {"enable_thinking": False}):
        out.append(as_ids(tok.apply_chat_template(messages, tools=tools, add_generation_prompt=True,
                                                  tokenize=True, **kwargs)))
    return out


def same(a, b):
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(float(a), float(b), rel_tol=1e-6, abs_tol=1e-7)
    return a == b


def norm_msgs(msgs):
    """Messages as plain dicts without null fields (Parquet has nulls where
    JSONL leaves a field out, and no nil lists)."""
    out = []
    for m in list(msgs):
        m = {k: (list(v) if isinstance(v, np.ndarray) else v) for k, v in dict(m).items()}
        out.append({k: v for k, v in m.items() if v is not None and not (k == "tool_calls" and len(v) == 0)})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parquet", required=True)
    ap.add_argument("--jsonl", required=True)
    ap.add_argument("--tokenizer", required=True, help="folder with tokenizer.json and tokenizer_config.json")
    args = ap.parse_args()

    table = pq.read_table(args.parquet)
    check_schema(table.schema)
    tok = AutoTokenizer.from_pretrained(args.tokenizer)

    rows = table.to_pylist()  # what HF datasets' rows hold
    steps = rendered = 0
    for i, row in enumerate(rows):
        msgs = row["prompt"]
        if not isinstance(msgs, list) or not msgs or not all(isinstance(m, dict) and isinstance(m["role"], str)
                                                            and isinstance(m["content"], str) for m in msgs):
            fail(f"row {i}: prompt is not a list of role/content messages: {msgs!r}")
        if len(row["input_ids"]) != len(row["prompt_ids"]) + len(row["responses"]):
            fail(f"row {i}: input_ids is not prompt_ids + responses")
        if len(row["response_mask"]) != len(row["responses"]) or len(row["old_log_probs"]) != len(row["responses"]):
            fail(f"row {i}: response_mask/old_log_probs do not cover responses")
        if row["kind"] != "step":
            continue
        steps += 1
        tools = json.loads(row["tools"]) if row["tools"] else None
        got = render(tok, msgs, tools)
        if row["prompt_ids"] not in got:
            want = row["prompt_ids"]
            first = next((k for k in range(min(len(want), len(got[0]))) if want[k] != got[0][k]), min(len(want), len(got[0])))
            fail(f"row {i} (step {row['step']}): the chat template over the row's prompt gives {len(got[0])} ids, "
                 f"hone recorded {len(want)}; first difference at {first}: "
                 f"{tok.decode(got[0][first:first + 12])!r} vs {tok.decode(want[first:first + 12])!r}")
        rendered += 1

    pj = pd.read_json(args.jsonl, lines=True)
    pp = pd.read_parquet(args.parquet)
    if len(pj) != len(pp) or set(pj.columns) != set(pp.columns):
        fail(f"jsonl {len(pj)} rows {sorted(pj.columns)}, parquet {len(pp)} rows {sorted(pp.columns)}")
    for col in ("rewards",):
        if pj[col].dtype != np.float64 or pp[col].dtype != np.float64:
            fail(f"{col}: jsonl {pj[col].dtype}, parquet {pp[col].dtype}; want float64")
    if pj["has_reward"].dtype != bool or pp["has_reward"].dtype != bool:
        fail(f"has_reward: jsonl {pj['has_reward'].dtype}, parquet {pp['has_reward'].dtype}")
    for i in range(len(pj)):
        for col in ["session", "task", "kind", "call", "leaf", "step", "policy_version", "rewards", "has_reward", "tools"]:
            a, b = pj[col].iloc[i], pp[col].iloc[i]
            if not same(a, b):
                fail(f"row {i} {col}: jsonl {a!r}, parquet {b!r}")
        for col in INT_LISTS + ["versions"]:
            a, b = [int(x) for x in pj[col].iloc[i]], [int(x) for x in pp[col].iloc[i]]
            if a != b:
                fail(f"row {i} {col}: jsonl and parquet differ")
        a, b = np.asarray(pj["old_log_probs"].iloc[i], dtype=np.float32), np.asarray(pp["old_log_probs"].iloc[i])
        if a.shape != b.shape or not np.array_equal(a, b):
            fail(f"row {i} old_log_probs: jsonl and parquet differ")
        for col in ("prompt", "response"):
            a, b = norm_msgs(pj[col].iloc[i]), norm_msgs(pp[col].iloc[i])
            if a != b:
                fail(f"row {i} {col}: jsonl {a!r}, parquet {b!r}")
        # Parquet keeps milliseconds (timestamp(ms)); JSONL the full time.
        if abs(pd.Timestamp(pj["created"].iloc[i]) - pd.Timestamp(pp["created"].iloc[i])) >= pd.Timedelta(milliseconds=1):
            fail(f"row {i} created: jsonl {pj['created'].iloc[i]!r}, parquet {pp['created'].iloc[i]!r}")

    print(json.dumps({
        "rows": len(rows),
        "steps": steps,
        "rendered": rendered,
        "schema": {f.name: str(f.type) for f in table.schema},
        "pandas_jsonl": {c: str(t) for c, t in pj.dtypes.items()},
        "pandas_parquet": {c: str(t) for c, t in pp.dtypes.items()},
    }))


if __name__ == "__main__":
    main()
