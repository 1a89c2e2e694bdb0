"""Shared by the transformers + PEFT references of hone's model/ and trainer/.

Loads a model folder hone wrote with transformers' AutoModelForCausalLM and a
LoRA adapter with PEFT's PeftModel.from_pretrained, and checks that both were
read whole: a weight transformers or PEFT did not take (missing, unexpected,
reshaped, or not equal to the file's value) is an error, not a warning, so a
parity test can never compare against a half-random model.
"""
import json
import os

import torch
from safetensors.torch import load_file, save_file

# Nothing may come from a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

DTYPES = {"float32": torch.float32, "float64": torch.float64}


def load_model(model_dir, dtype):
    """AutoModelForCausalLM.from_pretrained(model_dir) in dtype, eval mode,
    failing when any weight was missing, unexpected or mismatched."""
    from transformers import AutoModelForCausalLM

    model, info = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, output_loading_info=True)
    bad = {k: sorted(v) for k, v in info.items() if k in ("missing_keys", "unexpected_keys", "mismatched_keys") and v}
    if bad:
        raise SystemExit(f"transformers did not load {model_dir} whole: {bad}")
    # Every tensor of the file must be the model's, bit for bit.
    params = dict(model.named_parameters())
    for name, t in load_file(os.path.join(model_dir, "model.safetensors")).items():
        p = params.get(name)
        if p is None:
            raise SystemExit(f"{name}: in model.safetensors but not a parameter of {type(model).__name__}")
        if not torch.equal(p.detach().to(torch.float64), t.to(torch.float64)):
            raise SystemExit(f"{name}: transformers' value differs from the file's")
    model.eval()
    return model


def peft_name(file_name, adapter="default"):
    """The parameter name PEFT gives a tensor of adapter_model.safetensors
    (it inserts the adapter's name before .weight)."""
    stem, _, last = file_name.rpartition(".")
    return f"{stem}.{adapter}.{last}"


def file_name(param_name, adapter="default"):
    """Inverse of peft_name: the adapter_model.safetensors name of a PEFT
    parameter."""
    return param_name.replace(f".{adapter}.", ".")


def load_adapter(model, adapter_dir, trainable=False):
    """PeftModel.from_pretrained(model, adapter_dir), failing unless every
    LoRA parameter PEFT made came from the file with the file's value and
    every tensor of the file became one."""
    from peft import PeftModel

    pm = PeftModel.from_pretrained(model, adapter_dir, is_trainable=trainable)
    tensors = load_file(os.path.join(adapter_dir, "adapter_model.safetensors"))
    lora = {n: p for n, p in pm.named_parameters() if ".lora_" in n}
    names = {file_name(n) for n in lora}
    if names != set(tensors):
        raise SystemExit(
            f"PEFT's LoRA parameters and {adapter_dir}'s tensors differ: only PEFT {sorted(names - set(tensors))[:6]}, "
            f"only the file {sorted(set(tensors) - names)[:6]}"
        )
    for n, p in lora.items():
        if not torch.equal(p.detach().to(torch.float64), tensors[file_name(n)].to(torch.float64)):
            raise SystemExit(f"{n}: PEFT's value differs from the file's")
    pm.eval()
    return pm


def token_logp(model, seq):
    """Token-aligned log-probabilities of seq under model: [T], 0 at t=0."""
    logits = model(input_ids=torch.tensor([seq])).logits[0]
    lp = torch.log_softmax(logits[:-1], dim=-1).gather(1, torch.tensor(seq[1:])[:, None])[:, 0]
    return torch.cat([torch.zeros(1, dtype=lp.dtype), lp]), logits


def lora_grads(pm):
    """grad.{adapter_model.safetensors name} for every LoRA parameter."""
    return {"grad." + file_name(n): p.grad for n, p in pm.named_parameters() if ".lora_" in n}


def read_json(path):
    with open(path) as f:
        return json.load(f)


def write(path, tensors):
    """Writes float32 safetensors (hone's reader takes F32/F16/BF16)."""
    save_file({k: v.detach().to(torch.float32).contiguous() for k, v in tensors.items()}, path)
