#!/usr/bin/env python3
"""PyTorch (CPU, float32) side of bench/e2e: the same Qwen3 shapes and
workloads as hone's model/ and trainer on one preset.

Phases (one JSON line each, after a {"torch": version} line):
  prefill b1   one prompt of --prompt tokens into an empty KV cache, logits of the last
  decode b1    one token for 1 sequence attending to --prompt cached positions
  decode b16   the same for 16 sequences
  LoRA train   forward + backward + AdamW of a rank --rank LoRA on all seven projections
               of every layer, --train-seqs x --train-len tokens, loss = -mean token logprob

Attention is torch.nn.functional.scaled_dot_product_attention (causal in prefill
and training); the KV cache is preallocated and written in place. Random
N(0, 0.02) weights, no files.

usage: python bench/e2e/torch_e2e.py --preset tiny [--prompt 128] [--train-seqs 8]
       [--train-len 128] [--rank 16] [--threads 2] [--seconds 2]
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F

PRESETS = {  # model/presets.go
    "tiny": dict(vocab=362, hidden=128, inter=384, layers=4, heads=4, kv=2, head_dim=32),
    "small": dict(vocab=362, hidden=512, inter=1536, layers=8, heads=8, kv=4, head_dim=64),
    "qwen3-0.6b-shape": dict(vocab=151936, hidden=1024, inter=3072, layers=28, heads=16, kv=8, head_dim=128),
}
MODULES = ("q", "k", "v", "o", "gate", "up", "down")


class Qwen3:
    def __init__(self, p, rank, gen):
        self.p = p
        h, hd = p["hidden"], p["head_dim"]
        q, kv = p["heads"] * hd, p["kv"] * hd
        dims = {"q": (q, h), "k": (kv, h), "v": (kv, h), "o": (h, q), "gate": (p["inter"], h),
                "up": (p["inter"], h), "down": (h, p["inter"])}
        r = lambda *s: torch.randn(*s, generator=gen) * 0.02
        self.embed = r(p["vocab"], h)
        self.norm = torch.ones(h)
        self.layers = []
        self.lora = []
        for _ in range(p["layers"]):
            L = {m: r(*dims[m]) for m in MODULES}
            L.update(n1=torch.ones(h), n2=torch.ones(h), qn=torch.ones(hd), kn=torch.ones(hd))
            self.layers.append(L)
            self.lora.append({m: ((torch.rand(rank, dims[m][1], generator=gen) * 2 - 1) / dims[m][1] ** 0.5,
                                  torch.zeros(dims[m][0], rank)) for m in MODULES})
        self.scale = 2.0  # alpha = 2 * rank
        self.inv_freq = 1.0 / (1e6 ** (torch.arange(0, hd, 2).float() / hd))
        self.use_lora = False

    def params(self):
        return [t for l in self.lora for a, b in l.values() for t in (a, b)]

    @staticmethod
    def rms(x, w):
        return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))

    def rope(self, x, pos):  # x [b, heads, t, hd]
        f = pos[:, None].float() * self.inv_freq[None]
        emb = torch.cat((f, f), -1)
        d = x.shape[-1] // 2
        return x * emb.cos() + torch.cat((-x[..., d:], x[..., :d]), -1) * emb.sin()

    def lin(self, x, l, m):
        y = x @ self.layers[l][m].T
        if self.use_lora:
            a, b = self.lora[l][m]
            y = y + ((x @ a.T) @ b.T) * self.scale
        return y

    def forward(self, ids, past, cache=None, last=True):
        """ids [b, t]; cache: per layer (k, v) [b, kv, max, hd] written at past..past+t."""
        p = self.p
        b, t = ids.shape
        nh, nkv, hd = p["heads"], p["kv"], p["head_dim"]
        pos = torch.arange(past, past + t)
        x = self.embed[ids]
        for l, L in enumerate(self.layers):
            h = self.rms(x, L["n1"])
            q = self.rms(self.lin(h, l, "q").view(b, t, nh, hd), L["qn"]).transpose(1, 2)
            k = self.rms(self.lin(h, l, "k").view(b, t, nkv, hd), L["kn"]).transpose(1, 2)
            v = self.lin(h, l, "v").view(b, t, nkv, hd).transpose(1, 2)
            q, k = self.rope(q, pos), self.rope(k, pos)
            if cache is not None:
                ck, cv = cache[l]
                ck[:, :, past:past + t] = k
                cv[:, :, past:past + t] = v
                k, v = ck[:, :, :past + t], cv[:, :, :past + t]
            o = F.scaled_dot_product_attention(q, k, v, is_causal=(t > 1 and past == 0), enable_gqa=True)
            x = x + self.lin(o.transpose(1, 2).reshape(b, t, nh * hd), l, "o")
            h = self.rms(x, L["n2"])
            x = x + self.lin(F.silu(self.lin(h, l, "gate")) * self.lin(h, l, "up"), l, "down")
        if last:
            x = x[:, -1:]
        return self.rms(x, self.norm) @ self.embed.T

    def new_cache(self, b, n):
        p = self.p
        return [(torch.zeros(b, p["kv"], n, p["head_dim"]), torch.zeros(b, p["kv"], n, p["head_dim"]))
                for _ in range(p["layers"])]


def timed(seconds, tokens, fn):
    """tokens per wall second and per CPU-second (this process, all threads)."""
    t0, c0 = time.perf_counter(), time.process_time()
    fn()
    first, cfirst = time.perf_counter() - t0, time.process_time() - c0
    if first >= seconds:
        return tokens / first, tokens / cfirst
    n, t0, c0 = 0, time.perf_counter(), time.process_time()
    while n < 2 or time.perf_counter() - t0 < seconds:
        fn()
        n += 1
    return tokens * n / (time.perf_counter() - t0), tokens * n / (time.process_time() - c0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="tiny", choices=sorted(PRESETS))
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--train-seqs", type=int, default=8)
    ap.add_argument("--train-len", type=int, default=128)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=2.0)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(json.dumps({"torch": torch.__version__}), flush=True)
    gen = torch.Generator().manual_seed(1)
    p = PRESETS[args.preset]
    m = Qwen3(p, args.rank, gen)

    def emit(phase, tok):
        t, c = tok
        print(json.dumps({"phase": phase, "tokens_per_s": t, "tokens_per_cpu_s": c}), flush=True)

    with torch.inference_mode():
        ids = torch.randint(0, p["vocab"], (1, args.prompt), generator=gen)
        cache = m.new_cache(1, args.prompt + 1)
        emit("prefill b1", timed(args.seconds, args.prompt, lambda: m.forward(ids, 0, cache)))
        for b in (1, 16):
            cache = m.new_cache(b, args.prompt + 1)
            m.forward(torch.randint(0, p["vocab"], (b, args.prompt), generator=gen), 0, cache)
            step = torch.randint(0, p["vocab"], (b, 1), generator=gen)
            emit(f"decode b{b}", timed(args.seconds, b, lambda: m.forward(step, args.prompt, cache)))

    m.use_lora = True
    params = m.params()
    for t in params:
        t.requires_grad_(True)
    opt = torch.optim.AdamW(params, lr=1e-5, weight_decay=0.01)
    seqs = torch.randint(0, p["vocab"], (args.train_seqs, args.train_len), generator=gen)

    def train_step():
        opt.zero_grad(set_to_none=False)
        logits = m.forward(seqs, 0, last=False)[:, :-1]
        lp = torch.log_softmax(logits, -1).gather(-1, seqs[:, 1:, None])[..., 0]
        (-lp.mean()).backward()
        opt.step()

    emit("LoRA train", timed(args.seconds, args.train_seqs * args.train_len, train_step))


if __name__ == "__main__":
    main()
