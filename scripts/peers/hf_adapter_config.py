"""Prints adapter_config.json as PEFT's save_pretrained writes it.

Run with the peers' Python (scripts/peers/ensure.sh). Wraps a tiny random
Qwen3ForCausalLM (made in memory, nothing downloaded) with
get_peft_model(LoraConfig(task_type="CAUSAL_LM", r, lora_alpha, lora_dropout,
target_modules)), sets base_model_name_or_path, calls save_pretrained and
prints the adapter_config.json it wrote. trainer/parity_test.go compares it
with trainer/checkpoint's writer; with --golden it rewrites that writer's
golden file (target_modules sorted, peft_version dropped: hone is not PEFT).
"""
import argparse
import json
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_common  # noqa: E402,F401  (offline environment)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--r", type=int, default=8)
    ap.add_argument("--alpha", type=float, default=16)
    ap.add_argument("--dropout", type=float, default=0.05)
    ap.add_argument("--targets", default="v_proj,q_proj")
    ap.add_argument("--base", default="Qwen/Qwen3-0.6B")
    ap.add_argument("--golden", help="write the hone-comparable form to this file")
    args = ap.parse_args()
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen3Config(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, head_dim=16)
    alpha = int(args.alpha) if args.alpha == int(args.alpha) else args.alpha
    pm = get_peft_model(Qwen3ForCausalLM(cfg), LoraConfig(task_type="CAUSAL_LM", r=args.r, lora_alpha=alpha,
                                                          lora_dropout=args.dropout,
                                                          target_modules=args.targets.split(",")))
    pm.peft_config["default"].base_model_name_or_path = args.base
    with tempfile.TemporaryDirectory() as d:
        pm.save_pretrained(d, save_embedding_layers=False)
        with open(os.path.join(d, "adapter_config.json")) as f:
            raw = f.read()
    sys.stdout.write(raw)
    if args.golden:
        c = json.loads(raw)
        c.pop("peft_version", None)
        c["target_modules"] = sorted(c["target_modules"])
        with open(args.golden, "w") as f:
            f.write(json.dumps(c, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
