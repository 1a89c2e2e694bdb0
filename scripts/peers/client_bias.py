"""logit_bias that keeps a random model out of whitespace (shared by the
peers' client scripts).

Structured outputs let JSON have whitespace between tokens, and a model with
random weights, once constrained to a tool call's JSON, tends to fill
max_tokens with it (vLLM then returns a cut call). The OpenAI API's own
logit_bias bans every token that is only whitespace (byte-level BPE spells
space, newline, tab and carriage return as Ġ, Ċ, ĉ, č).
"""

import json
import os


def whitespace_bias(tokenizer_dir):
    with open(os.path.join(tokenizer_dir, "tokenizer.json"), encoding="utf-8") as f:
        vocab = json.load(f)["model"]["vocab"]
    return {str(i): -100 for tok, i in vocab.items() if tok and not tok.strip("ĠĊĉč")}
