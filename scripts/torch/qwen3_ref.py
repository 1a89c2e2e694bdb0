#!/usr/bin/python3
"""Reference Qwen3 / Qwen2 / Llama forward (and LoRA gradients) in PyTorch.

No longer hone's parity reference: transformers + PEFT are (model/parity_test.go
and trainer/parity_test.go run scripts/peers/hf_*.py in the peers' virtualenv).
It stays for scripts/torch/trainer_bench.py, the LoRA-training speed anchor on
Debian's python3-torch 1.13, which has no transformers, and for
trainer_adamw.py's safetensors helpers.

Reads a Hugging Face model folder (config.json + model.safetensors) and
optionally a PEFT adapter folder, parsing safetensors with json + numpy (no
`safetensors` or `transformers` package), and follows transformers'
modeling_qwen3.py: RMSNorm, q/k per-head norm (Qwen3), rotate-half RoPE,
grouped-query causal attention, SwiGLU MLP, tied or separate lm_head.

Input (--input JSON): {"sequences": [[ids...], ...], "loss_mask": [[0/1 per
target...], ...]} where loss_mask[i][t] weighs log p(seq[t+1] | seq[:t+1]).
Output (--out, a safetensors file):
  logits.{i}         [T, V] base-model logits of sequence i
  lora_logits.{i}    [T, V] with the adapter (when --adapter is given)
  logp.{i}           [T-1]  per-token log-probabilities with the adapter
  grad.{peft name}   gradient of the masked mean token log-probability with
                     respect to each LoRA tensor
  loss               [1]    the masked mean token log-probability
"""
import argparse
import json
import math
import os
import struct

import numpy as np
import torch


def read_safetensors(path):
    with open(path, "rb") as f:
        buf = f.read()
    (n,) = struct.unpack("<Q", buf[:8])
    header = json.loads(buf[8:8 + n])
    body = buf[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        lo, hi = info["data_offsets"]
        raw = body[lo:hi]
        dtype = info["dtype"]
        if dtype == "F32":
            arr = np.frombuffer(raw, dtype="<f4")
        elif dtype == "F16":
            arr = np.frombuffer(raw, dtype="<f2").astype(np.float32)
        elif dtype == "BF16":
            arr = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise ValueError(f"{name}: unsupported dtype {dtype}")
        out[name] = torch.from_numpy(arr.copy().reshape(info["shape"]))
    return out


def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        arr = tensors[name].detach().to(torch.float32).contiguous().numpy().astype("<f4")
        data = arr.tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    hj = json.dumps(header, separators=(",", ":")).encode()
    hj += b" " * ((8 - (8 + len(hj)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for b in blobs:
            f.write(b)


class Reference:
    def __init__(self, model_dir, dtype):
        with open(os.path.join(model_dir, "config.json")) as f:
            cfg = json.load(f)
        self.arch = cfg["architectures"][0]
        self.hidden = cfg["hidden_size"]
        self.heads = cfg["num_attention_heads"]
        self.kv_heads = cfg.get("num_key_value_heads") or self.heads
        self.head_dim = cfg.get("head_dim") or self.hidden // self.heads
        self.layers = cfg["num_hidden_layers"]
        self.eps = cfg["rms_norm_eps"]
        theta = cfg.get("rope_theta")
        if theta is None:
            theta = (cfg.get("rope_parameters") or {}).get("rope_theta", 10000.0)
        self.theta = float(theta)
        self.scaling = cfg.get("rope_scaling") or (cfg.get("rope_parameters") or {})
        if self.scaling.get("rope_type", self.scaling.get("type", "default")) not in ("default", "llama3"):
            raise ValueError(f"unsupported rope scaling {self.scaling}")
        self.tied = cfg.get("tie_word_embeddings", False)
        self.qk_norm = self.arch == "Qwen3ForCausalLM"
        self.dtype = dtype
        self.w = {k: v.to(dtype) for k, v in read_safetensors(os.path.join(model_dir, "model.safetensors")).items()}
        self.lora = {}
        self.scale = 0.0

    def load_adapter(self, adapter_dir):
        with open(os.path.join(adapter_dir, "adapter_config.json")) as f:
            ac = json.load(f)
        r, alpha = ac["r"], ac["lora_alpha"]
        self.scale = alpha / (math.sqrt(r) if ac.get("use_rslora") else r)
        self.lora = {k: v.to(self.dtype).requires_grad_(True)
                     for k, v in read_safetensors(os.path.join(adapter_dir, "adapter_model.safetensors")).items()}

    def rms(self, x, w):
        var = x.pow(2).mean(-1, keepdim=True)
        return w * (x * torch.rsqrt(var + self.eps))

    def linear(self, x, layer, path, use_lora):
        pre = f"model.layers.{layer}.{path}"
        y = x @ self.w[pre + ".weight"].T
        if pre + ".bias" in self.w:
            y = y + self.w[pre + ".bias"]
        a = self.lora.get(f"base_model.model.{pre}.lora_A.weight")
        if use_lora and a is not None:
            b = self.lora[f"base_model.model.{pre}.lora_B.weight"]
            y = y + self.scale * ((x @ a.T) @ b.T)
        return y

    def inv_freq(self):
        d = self.head_dim
        inv_freq = 1.0 / (self.theta ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
        s = self.scaling
        if s.get("rope_type") != "llama3":
            return inv_freq
        # transformers' _compute_llama3_parameters
        factor, low, high = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
        old = s["original_max_position_embeddings"]
        wavelen = 2 * math.pi / inv_freq
        scaled = torch.where(wavelen > old / low, inv_freq / factor, inv_freq)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < old / high) * ~(wavelen > old / low)
        return torch.where(medium, smoothed, scaled)

    def rope(self, x, pos):
        d = self.head_dim
        inv_freq = self.inv_freq()
        freqs = pos[:, None].float() * inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().to(self.dtype)[:, None, :], emb.sin().to(self.dtype)[:, None, :]
        x1, x2 = x[..., : d // 2], x[..., d // 2:]
        rot = torch.cat((-x2, x1), dim=-1)
        return x * cos + rot * sin

    def forward(self, ids, use_lora):
        t = len(ids)
        pos = torch.arange(t)
        x = self.w["model.embed_tokens.weight"][torch.tensor(ids)]
        mask = torch.full((t, t), float("-inf"), dtype=self.dtype).triu(1)
        rep = self.heads // self.kv_heads
        for l in range(self.layers):
            pre = f"model.layers.{l}."
            h = self.rms(x, self.w[pre + "input_layernorm.weight"])
            q = self.linear(h, l, "self_attn.q_proj", use_lora).view(t, self.heads, self.head_dim)
            k = self.linear(h, l, "self_attn.k_proj", use_lora).view(t, self.kv_heads, self.head_dim)
            v = self.linear(h, l, "self_attn.v_proj", use_lora).view(t, self.kv_heads, self.head_dim)
            if self.qk_norm:
                q = self.rms(q, self.w[pre + "self_attn.q_norm.weight"])
                k = self.rms(k, self.w[pre + "self_attn.k_norm.weight"])
            q, k = self.rope(q, pos), self.rope(k, pos)
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
            q, k, v = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)
            att = (q @ k.transpose(1, 2)) / math.sqrt(self.head_dim) + mask
            o = (torch.softmax(att, dim=-1) @ v).transpose(0, 1).reshape(t, self.heads * self.head_dim)
            x = x + self.linear(o, l, "self_attn.o_proj", use_lora)
            h = self.rms(x, self.w[pre + "post_attention_layernorm.weight"])
            g = self.linear(h, l, "mlp.gate_proj", use_lora)
            u = self.linear(h, l, "mlp.up_proj", use_lora)
            x = x + self.linear(torch.nn.functional.silu(g) * u, l, "mlp.down_proj", use_lora)
        x = self.rms(x, self.w["model.norm.weight"])
        head = self.w["model.embed_tokens.weight"] if self.tied else self.w["lm_head.weight"]
        return x @ head.T


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--adapter")
    ap.add_argument("--input", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--dtype", default="float64", choices=["float32", "float64"])
    args = ap.parse_args()
    dtype = getattr(torch, args.dtype)
    torch.set_num_threads(1)
    ref = Reference(args.model, dtype)
    with open(args.input) as f:
        inp = json.load(f)
    out = {}
    with torch.no_grad():
        for i, seq in enumerate(inp["sequences"]):
            out[f"logits.{i}"] = ref.forward(seq, False)
    if args.adapter:
        ref.load_adapter(args.adapter)
        total, count = 0.0, 0.0
        for i, seq in enumerate(inp["sequences"]):
            logits = ref.forward(seq, True)
            out[f"lora_logits.{i}"] = logits.detach()
            logp = torch.log_softmax(logits[:-1], dim=-1).gather(1, torch.tensor(seq[1:])[:, None])[:, 0]
            out[f"logp.{i}"] = logp.detach()
            m = torch.tensor(inp["loss_mask"][i], dtype=dtype)
            total = total + (logp * m).sum()
            count += float(m.sum())
        loss = total / count
        loss.backward()
        out["loss"] = loss.detach().reshape(1)
        for name, p in ref.lora.items():
            out["grad." + name] = p.grad
    write_safetensors(args.out, out)


if __name__ == "__main__":
    main()
