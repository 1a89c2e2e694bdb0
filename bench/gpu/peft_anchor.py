"""transformers + PEFT anchor for bench/gpu: the same LoRA step on the same shapes.

One step is what bench/gpu times: a forward of one --tokens long sequence of
random ids, the mean token log-probability as the loss (log_softmax of the
logits in float32, gathered at the next token), backward, and AdamW
(lr 1e-5, weight decay 0.01) over a rank --rank LoRA (alpha 2r, no dropout)
on q, k, v, o, gate, up and down; the base is frozen. Weights are random
(transformers' own init, made on the device: nothing is downloaded).

Dtypes: fp32 (TF32 off: what hone's float32 GEMMs compute), bf16 (the base
weights in bfloat16, PEFT's adapter in float32 as its autocast_adapter_dtype
default makes it, so PEFT runs the LoRA linears in float32) and
bf16-autocast (the same under torch.autocast(bfloat16), as transformers'
Trainer runs with bf16=True: the LoRA linears in bf16 too, which is what
hone's autocast does). --grad-ckpt turns on gradient checkpointing (hone's
activation checkpointing counterpart). Attention: --attn (default sdpa,
which PyTorch dispatches to cuDNN or FlashAttention on a Hopper GPU).

Prints a table and, with --json FILE, one JSON object per row. Runs on the
CPU with --tiny (a check of the script itself, no GPU figure). Needs torch,
transformers (Qwen3) and peft.
"""
import argparse
import json
import sys
import time

SHAPES = {
    "tiny": dict(vocab_size=256, hidden_size=128, intermediate_size=384, num_hidden_layers=4, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=32, tie_word_embeddings=True),
    "qwen3-0.6b": dict(vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                       num_attention_heads=16, num_key_value_heads=8, head_dim=128, tie_word_embeddings=True),
    "qwen3-8b": dict(vocab_size=151936, hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
                     num_attention_heads=32, num_key_value_heads=8, head_dim=128, tie_word_embeddings=False),
}
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def run_one(torch, shape, dtype, args, device):
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen3Config, Qwen3ForCausalLM

    dt = {"fp32": torch.float32, "bf16": torch.bfloat16, "bf16-autocast": torch.bfloat16}[dtype]
    autocast = dtype == "bf16-autocast"
    cfg = Qwen3Config(**SHAPES[shape], max_position_embeddings=max(40960, args.tokens), rms_norm_eps=1e-6,
                      rope_theta=1e6, attention_bias=False)
    cfg._attn_implementation = args.attn
    torch.manual_seed(1)
    t0 = time.time()
    with torch.device(device):
        model = Qwen3ForCausalLM(cfg).to(dt)
    model.config.use_cache = False
    if args.grad_ckpt:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    model = get_peft_model(model, LoraConfig(r=args.rank, lora_alpha=2 * args.rank, lora_dropout=0.0,
                                             target_modules=TARGETS))
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-5, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    gen = torch.Generator().manual_seed(2)
    ids = torch.randint(0, cfg.vocab_size, (1, args.tokens), generator=gen).to(device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    sync()
    init = time.time() - t0

    def step():
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=autocast):
            logits = model(input_ids=ids).logits[0, :-1].float()
        lp = torch.log_softmax(logits, dim=-1).gather(1, ids[0, 1:, None])[:, 0]
        loss = -lp.mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    step()  # warm-up
    sync()
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    t0 = time.time()
    for _ in range(args.steps):
        step()
    sync()
    sec = (time.time() - t0) / args.steps
    peak = torch.cuda.max_memory_allocated() / 1e9 if device == "cuda" else None
    return dict(shape=shape, dtype=dtype, grad_ckpt=args.grad_ckpt, attn=args.attn, tokens=args.tokens,
                seconds_per_step=sec, tokens_per_sec=args.tokens / sec, peak_gb=peak, init_seconds=init)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="qwen3-0.6b,qwen3-8b", help="comma-separated: " + ", ".join(SHAPES))
    ap.add_argument("--dtypes", default="bf16,bf16-autocast,fp32", help="comma-separated: bf16, bf16-autocast, fp32")
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--attn", default="sdpa", help="transformers attention implementation (sdpa, eager, flash_attention_2)")
    ap.add_argument("--grad-ckpt", action="store_true", help="gradient checkpointing on")
    ap.add_argument("--tiny", action="store_true", help="the tiny shape on the CPU (checks the script)")
    ap.add_argument("--json", help="write one JSON object per row to this file")
    args = ap.parse_args()
    try:
        import torch
        import peft  # noqa: F401
        import transformers
    except ImportError as e:
        print(f"peft_anchor: not run: {e} (needs torch, transformers and peft)", file=sys.stderr)
        return 3
    device = "cuda" if torch.cuda.is_available() and not args.tiny else "cpu"
    shapes = ["tiny"] if args.tiny else args.shapes.split(",")
    if device == "cpu" and not args.tiny:
        print("peft_anchor: not measured: torch sees no GPU (torch.cuda.is_available() is false); --tiny checks the "
              "script on the CPU", file=sys.stderr)
        return 2
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        name = torch.cuda.get_device_name(0)
    else:
        name = "the CPU (no GPU figure)"
    print(f"transformers {transformers.__version__} + PEFT {peft.__version__} on torch {torch.__version__}, {name}: "
          f"LoRA r{args.rank} step, one {args.tokens}-token sequence, mean of {args.steps} step(s) after a warm-up, "
          f"attention {args.attn}, gradient checkpointing {'on' if args.grad_ckpt else 'off'}")
    rows = []
    for shape in shapes:
        if shape not in SHAPES:
            print(f"peft_anchor: unknown shape {shape!r} (have {', '.join(SHAPES)})", file=sys.stderr)
            return 1
        for dtype in args.dtypes.split(","):
            try:
                r = run_one(torch, shape, dtype, args, device)
            except torch.cuda.OutOfMemoryError as e:  # noqa: F841
                r = dict(shape=shape, dtype=dtype, grad_ckpt=args.grad_ckpt, attn=args.attn, tokens=args.tokens,
                         error="out of memory")
            if device == "cuda":
                torch.cuda.empty_cache()
            rows.append(r)
            if "error" in r:
                print(f"{shape:12s} {dtype:13s} {r['error']}")
            else:
                peak = f"{r['peak_gb']:.1f} GB peak" if r["peak_gb"] is not None else ""
                print(f"{shape:12s} {dtype:13s} {r['seconds_per_step']:.3f} s/step  {r['tokens_per_sec']:,.0f} tokens/s  "
                      f"{peak}  (init {r['init_seconds']:.1f} s)")
            sys.stdout.flush()
    if args.json:
        with open(args.json, "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
