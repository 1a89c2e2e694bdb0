"""transformers + PEFT reference for hone's trainer losses and their LoRA gradients.

Run with the peers' Python (scripts/peers/ensure.sh). Loads the model folder
with transformers' AutoModelForCausalLM and the adapter hone's trainer wrote
(trainer/checkpoint) with PEFT's PeftModel.from_pretrained (is_trainable),
both in float64; evaluates the trainer's loss, written independently here
with torch ops, and lets autograd through transformers + PEFT produce the
LoRA gradients. The frozen reference of the KL term is the same PeftModel
under disable_adapter().

Input (--input JSON):
  sequences   [[ids...], ...]
  mask        [[0/1 per token]]  token-aligned: mask[i][t] trains token t
  behaviour   [[logprob per token]] (ppo)
  advantages  [[advantage per token]] (ppo)
  weights     [w per sequence]
  loss        {"kind": "sft"|"ppo", "clip_low", "clip_high", "dual_clip", "tis_cap",
               "kl_coef", "kl_estimator": "k1"|"k2"|"k3",
               "aggregation": "token-mean"|"seq-mean"}
Output (--out safetensors): loss [1], logp.{i} [T] token-aligned (0 at t=0),
grad.{adapter_model.safetensors name} for every LoRA tensor.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_common as hf  # noqa: E402


def kl(est, lp, ref_lp):
    d = lp - ref_lp
    if est == "k1":
        return d
    if est == "k2":
        return 0.5 * d * d
    return torch.exp(-d) + d - 1


def ppo(o, lp, old, adv):
    iw = 1.0
    if o.get("tis_cap", 0) > 0:
        # decoupled PPO: ratio against the current (proximal) policy, times
        # the truncated importance weight against the behaviour policy
        ratio = torch.exp(lp - lp.detach())
        iw = torch.clamp(torch.exp(lp.detach() - old), max=o["tis_cap"])
    else:
        ratio = torch.exp(lp - old)
    return iw * clipped(o, ratio, adv)


def clipped(o, ratio, adv):
    pg1 = -adv * ratio
    pg2 = -adv * torch.clamp(ratio, 1 - o["clip_low"], 1 + o["clip_high"])
    clip1 = torch.maximum(pg1, pg2)
    if o.get("dual_clip", 0) > 0:
        clip2 = torch.minimum(-adv * o["dual_clip"], clip1)
        return torch.where(adv < 0, clip2, clip1)
    return clip1


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--adapter", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--dtype", default="float64", choices=sorted(hf.DTYPES))
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    dtype = hf.DTYPES[args.dtype]
    torch.set_num_threads(args.threads)
    inp = hf.read_json(args.input)
    o = inp["loss"]
    pm = hf.load_adapter(hf.load_model(args.model, dtype), args.adapter, trainable=True)
    refs = []
    if o.get("kl_coef", 0) > 0:
        with torch.no_grad(), pm.disable_adapter():
            refs = [hf.token_logp(pm, s)[0] for s in inp["sequences"]]
    out, per_seq, masks = {}, [], []
    for i, seq in enumerate(inp["sequences"]):
        lp, _ = hf.token_logp(pm, seq)
        out[f"logp.{i}"] = lp
        m = torch.tensor(inp["mask"][i], dtype=dtype)
        m[0] = 0
        if o["kind"] == "sft":
            tok = -lp
        else:
            old = torch.tensor(inp["behaviour"][i], dtype=dtype)
            adv = torch.tensor(inp["advantages"][i], dtype=dtype)
            tok = ppo(o, lp, old, adv)
        if o.get("kl_coef", 0) > 0:
            tok = tok + o["kl_coef"] * kl(o["kl_estimator"], lp, refs[i])
        per_seq.append(inp["weights"][i] * (tok * m).sum())
        masks.append(m.sum())
    if o["aggregation"] == "seq-mean":
        loss = sum(s / n for s, n in zip(per_seq, masks)) / len(per_seq)
    else:
        loss = sum(per_seq) / sum(masks)
    loss.backward()
    out["loss"] = loss.reshape(1)
    out.update(hf.lora_grads(pm))
    hf.write(args.out, out)


if __name__ == "__main__":
    main()
