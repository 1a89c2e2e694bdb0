"""transformers + PEFT as the reference of hone's model/ (forward, LoRA, backward).

Run with the peers' Python (scripts/peers/ensure.sh). Reads a model folder
hone wrote (config.json + model.safetensors) with transformers'
AutoModelForCausalLM and writes, into --out (safetensors, float32):

  logits.{i}        [T, V] transformers' logits of sequence i (--dtype)
  lora_logits.{i}   [T, V] with --adapter (hone's adapter folder) loaded by
                    PeftModel.from_pretrained
  loss, grad.{name} with --adapter and loss_mask in --input: the masked mean
                    token log-probability, computed in float64, and its
                    gradient with respect to every LoRA tensor (autograd
                    through transformers + PEFT)
  peft_logits.{i}   [T, V] with the adapter --peft-save made: PEFT's
                    get_peft_model(LoraConfig(**--peft-config)), lora_A as PEFT
                    initialises it, lora_B N(0, 0.3^2) (seeded), written by
                    save_pretrained into --peft-save (in the dtype
                    "save_dtype" names, if the config has it)

Input (--input JSON): {"sequences": [[ids...], ...], "loss_mask": [[0/1 per
target...], ...]} where loss_mask[i][t] weighs log p(seq[t+1] | seq[:t+1]).
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_common as hf  # noqa: E402


def logits_of(model, seqs, prefix, out):
    with torch.no_grad():
        for i, s in enumerate(seqs):
            out[f"{prefix}.{i}"] = model(input_ids=torch.tensor([s])).logits[0]


def masked_mean_grads(args, seqs, masks, out):
    model = hf.load_model(args.model, torch.float64)
    pm = hf.load_adapter(model, args.adapter, trainable=True)
    total, count = 0.0, 0.0
    for s, m in zip(seqs, masks):
        lp, _ = hf.token_logp(pm, s)
        m = torch.tensor(m, dtype=torch.float64)
        total = total + (lp[1:] * m).sum()
        count += float(m.sum())
    loss = total / count
    loss.backward()
    out["loss"] = loss.reshape(1)
    out.update(hf.lora_grads(pm))


def peft_save(args, seqs, out):
    from peft import LoraConfig, get_peft_model

    spec = json.loads(args.peft_config)
    seed = spec.pop("seed", 0)
    save_dtype = spec.pop("save_dtype", None)
    model = hf.load_model(args.model, hf.DTYPES[args.dtype])
    torch.manual_seed(seed)
    pm = get_peft_model(model, LoraConfig(task_type="CAUSAL_LM", lora_dropout=0.0, **spec))
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for n, p in pm.named_parameters():
            if ".lora_B." in n:
                p.copy_(0.3 * torch.randn(p.shape, generator=g, dtype=torch.float64))
    lora = [p for n, p in pm.named_parameters() if ".lora_" in n]
    if save_dtype:
        # The adapter is stored in save_dtype (as one trained in bf16 is);
        # the logits below use the same, rounded, values in --dtype.
        for p in lora:
            p.data = p.data.to(getattr(torch, save_dtype))
    pm.save_pretrained(args.peft_save)
    if save_dtype:
        for p in lora:
            p.data = p.data.to(hf.DTYPES[args.dtype])
        saved = hf.load_file(os.path.join(args.peft_save, "adapter_model.safetensors"))
        if {t.dtype for t in saved.values()} != {getattr(torch, save_dtype)}:
            raise SystemExit(f"save_pretrained wrote {sorted({str(t.dtype) for t in saved.values()})}, not {save_dtype}")
    pm.eval()
    logits_of(pm, seqs, "peft_logits", out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--dtype", default="float32", choices=sorted(hf.DTYPES))
    ap.add_argument("--adapter", help="hone's adapter folder, loaded with PeftModel.from_pretrained")
    ap.add_argument("--peft-save", help="folder for an adapter PEFT makes and saves")
    ap.add_argument("--peft-config", default='{"r": 4, "lora_alpha": 8, "target_modules": "all-linear"}',
                    help="LoraConfig arguments as JSON (plus seed, save_dtype)")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    inp = hf.read_json(args.input)
    seqs = inp["sequences"]
    out = {}
    model = hf.load_model(args.model, hf.DTYPES[args.dtype])
    logits_of(model, seqs, "logits", out)
    if args.adapter:
        pm = hf.load_adapter(model, args.adapter)
        logits_of(pm, seqs, "lora_logits", out)
        if inp.get("loss_mask"):
            masked_mean_grads(args, seqs, inp["loss_mask"], out)
    if args.peft_save:
        peft_save(args, seqs, out)
    hf.write(args.out, out)


if __name__ == "__main__":
    main()
