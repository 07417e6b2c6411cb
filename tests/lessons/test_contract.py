"""The graded contract, kept apart from the code that implements it.

COURSE_SPEC.md names every graded function and class with its exact signature; submissions
that are not in this repository are graded against those names. :data:`CONTRACT` is an
independent copy of them, so that renaming an argument in a reference notebook (or in one
edition of it) fails here instead of silently changing what students are asked to write.
Where the specification itself is at hand (``../shared/COURSE_SPEC.md`` beside a checkout,
or ``$COURSE_SPEC``), the copy is compared with it too.
"""

from __future__ import annotations

import ast
import json
import os
import re
from pathlib import Path

import pytest

from coursekit import catalogue

ROOT = Path(__file__).resolve().parents[2]

# lesson number -> {name: signature}; methods as "Class.method". Signatures as the spec writes
# them: argument names and defaults, without annotations and without ``self``.
CONTRACT: dict[str, dict[str, str]] = {
    "01": {"dot_scores": "Q, K", "softmax": "x, axis=-1", "attention": "Q, K, V, scale=True"},
    "02": {"split_qkv": "x, n_state", "split_heads": "x, n_head, k=False", "merge_heads": "x"},
    "03": {
        "scaled_dot_product_attention": "q, k, v, mask=None, dropout_p=0.0",
        "causal_mask": "L, device=None",
        "padding_mask": "tokens, pad_id",
    },
    "04": {
        "MultiHeadAttention.__init__": "d_model, n_head, dropout=0.0, bias=True",
        "MultiHeadAttention.forward": "query, key, value, mask=None",
    },
    "05": {
        "layer_norm": "x, gamma, beta, eps=1e-5",
        "batch_norm": "x, gamma, beta, eps=1e-5",
        "layer_norm_backward": "dout, x, gamma, eps=1e-5",
        "LayerNorm.__init__": "d_model, eps=1e-5",
    },
    "06": {"gelu": "x", "gelu_tanh": "x", "gelu_grad": "x"},
    "07": {
        "sinusoidal_positional_encoding": "max_len, d_model",
        "PositionalEncoding.__init__": "d_model, max_len=5000, dropout=0.0",
        "TokenEmbedding.__init__": "vocab_size, d_model",
    },
    "08": {
        "PositionwiseFeedForward.__init__": "d_model, d_ff, dropout=0.0, activation='relu'",
        "EncoderLayer.__init__": "d_model, n_head, d_ff, dropout=0.0, norm_first=False",
        "EncoderLayer.forward": "x, src_mask=None",
        "DecoderLayer.__init__": "d_model, n_head, d_ff, dropout=0.0, norm_first=False",
        "DecoderLayer.forward": "x, memory, tgt_mask=None, memory_mask=None",
        "Transformer.__init__": (
            "src_vocab, tgt_vocab, d_model=512, n_head=8, num_encoder_layers=6, "
            "num_decoder_layers=6, d_ff=2048, dropout=0.1, max_len=512, pad_id=0, norm_first=False"
        ),
        "Transformer.encode": "src, src_mask=None",
        "Transformer.decode": "tgt, memory, tgt_mask=None, memory_mask=None",
        "Transformer.forward": "src, tgt",
        "greedy_decode": "model, src, max_len, bos_id, eos_id",
    },
    "09": {
        "noam_lr": "step, d_model, warmup",
        "label_smoothed_nll": "logits, target, smoothing, pad_id",
        "train_step": "model, batch, optimizer, scheduler=None, smoothing=0.0",
    },
    "10": {
        "rms_norm": "x, weight, eps=1e-6",
        "RMSNorm.__init__": "d_model, eps=1e-6",
        "rope_angles": "max_len, d_head, base=10000.0",
        "apply_rope": "x, cos, sin",
        "SwiGLU.__init__": "d_model, d_ff",
        "DecoderBlock.__init__": "d_model, n_head, d_ff, dropout=0.0",
        "DecoderBlock.forward": "x, cos, sin, key_mask=None",
        "DecoderLM.__init__": (
            "vocab_size, d_model=128, n_head=4, n_layer=4, d_ff=None, max_len=512, dropout=0.0, "
            "pad_id=0, tie_weights=True"
        ),
        "DecoderLM.forward": "ids",
        "lm_loss": "logits, ids, loss_mask",
    },
    "11": {
        "filter_logits": "logits, temperature=1.0, top_k=None, top_p=None",
        "sample": "logits, temperature=1.0, top_k=None, top_p=None, generator=None",
        "KVCache.__init__": "",
        "decoder_step": "model, ids, cache",
        "generate": (
            "model, prompt, max_new_tokens, eos_id, temperature=0.0, top_k=None, top_p=None, "
            "generator=None, use_cache=True"
        ),
        "beam_search": "model, src, beam_size, max_len, bos_id, eos_id, length_penalty=0.6",
    },
    "12": {
        "merge_softmax_stats": "m_a, l_a, m_b, l_b",
        "flash_attention": "q, k, v, causal=False, key_mask=None, block_q=64, block_k=64",
        "flash_attention_backward": (
            "q, k, v, out, lse, dout, causal=False, key_mask=None, block_q=64, block_k=64"
        ),
        "repeat_kv": "x, n_rep",
        "sliding_window_mask": "L, window, device=None",
        "GroupedQueryAttention.__init__": "d_model, n_head, n_kv_head, window=None",
        "GroupedQueryAttention.forward": "x, cos, sin, key_mask=None",
    },
}

# Names graded within another exercise's points: lesson 11's KVCache is graded through
# decoder_step (the hidden tests read the cache only through generate and decoder_step).
GRADED_WITHIN = {"KVCache": "decoder_step"}


def normalise(signature: str) -> str:
    """One spelling per signature: no spaces, no ``self``, defaults as Python would print them."""
    args = ast.parse(f"def f({signature}): pass").body[0].args
    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    parts = [
        arg.arg if default is None else f"{arg.arg}={_value(default)}"
        for arg, default in zip(positional, defaults, strict=True)
        if arg.arg != "self"
    ]
    if args.vararg:
        parts.append(f"*{args.vararg.arg}")
    parts += [arg.arg for arg in args.kwonlyargs]
    if args.kwarg:
        parts.append(f"**{args.kwarg.arg}")
    return ",".join(parts)


def _value(default: ast.expr) -> str:
    try:
        return repr(ast.literal_eval(default))  # 1e-5 and 0.00001 are the same default
    except ValueError:
        return ast.unparse(default)


def signatures_in(path: Path) -> dict[str, str]:
    """Every top-level function and every method of a top-level class in a notebook's code."""
    found: dict[str, str] = {}
    for cell in catalogue.code_cells(catalogue.read_json(path)):
        tree = catalogue.parse(catalogue.cell_source(cell))
        for node in tree.body if tree else ():
            if isinstance(node, ast.FunctionDef):
                found[node.name] = normalise(ast.unparse(_bare(node.args)))
            elif isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef):
                        found[f"{node.name}.{item.name}"] = normalise(ast.unparse(_bare(item.args)))
    return found


def _bare(args: ast.arguments) -> ast.arguments:
    for arg in args.posonlyargs + args.args + args.kwonlyargs:
        arg.annotation = None
    return args


def test_the_catalogue_grades_the_contracts_names() -> None:
    for lesson in catalogue.lessons():
        top_level = {GRADED_WITHIN.get(name.split(".")[0], name.split(".")[0]) for name in CONTRACT[lesson.number]}
        assert set(lesson.graded) == top_level, lesson.id
    assert sorted(CONTRACT) == [lesson.number for lesson in catalogue.lessons()]


@pytest.mark.parametrize(
    ("lesson", "edition"),
    [(lesson, edition) for lesson in catalogue.lessons() for edition in lesson.editions],
    ids=lambda value: getattr(value, "id", value),
)
def test_reference_notebooks_keep_the_contracts_signatures(
    lesson: catalogue.Lesson, edition: str
) -> None:
    found = signatures_in(lesson.solution(edition))
    for name, signature in CONTRACT[lesson.number].items():
        assert name in found, f"{lesson.solution(edition).name} does not define {name}"
        assert found[name] == normalise(signature), f"{name}({found[name]}) != ({signature})"


@pytest.mark.parametrize("lesson", catalogue.lessons(), ids=lambda lesson: lesson.id)
def test_student_notebooks_ask_for_the_same_signatures(lesson: catalogue.Lesson) -> None:
    for edition, path in lesson.notebooks("student").items():
        found = signatures_in(path)
        for name, signature in CONTRACT[lesson.number].items():
            assert found.get(name) == normalise(signature), f"{edition}: {name}"


def _spec() -> Path | None:
    for candidate in (os.environ.get("COURSE_SPEC"), ROOT.parent / "shared" / "COURSE_SPEC.md"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    return None


def spec_signatures(text: str) -> dict[str, dict[str, str]]:
    """The ``name(args)`` each lesson's section of the specification writes, methods as
    ``Class.method`` when the bullet that writes them is about ``class Class``."""
    found: dict[str, dict[str, str]] = {}
    for section in re.split(r"^### ", text, flags=re.M)[1:]:
        match = re.match(r"(\d\d)_\w+", section)
        if not match:
            continue
        names = found.setdefault(match.group(1), {})
        for bullet in re.split(r"^- ", section, flags=re.M)[1:]:
            owner = re.search(r"`class (\w+)\(", bullet)
            for call in re.finditer(r"`(\w+)\(([^`]*)\)`", bullet):
                name, args = call.groups()
                # a function written before the class in the same bullet is not its method
                method = owner and call.start() > owner.start() and (name.startswith("__") or name[0].islower())
                names.setdefault(f"{owner.group(1)}.{name}" if method else name, args)
    return found


# What the specification says in words rather than as a signature ("same arguments").
NOT_SPELLED_OUT = {"DecoderLayer.__init__", "KVCache.__init__"}  # KVCache(): "`class KVCache`", no arguments


def test_the_copy_matches_the_specification() -> None:
    spec = _spec()
    if spec is None:
        pytest.skip("COURSE_SPEC.md is not beside this checkout (set COURSE_SPEC to its path)")
    written = spec_signatures(spec.read_text(encoding="utf-8"))
    for number, names in CONTRACT.items():
        for name, signature in names.items():
            if name in NOT_SPELLED_OUT:
                continue
            assert name in written.get(number, {}), f"COURSE_SPEC.md does not name {name}"
            assert normalise(written[number][name]) == normalise(signature), (
                f"lesson {number}: {name}({signature}) but COURSE_SPEC.md says "
                f"{name}({written[number][name]})"
            )


def test_contract_copy_is_plain_data() -> None:
    json.dumps(CONTRACT)  # nothing computed: a reviewer reads it against the spec line by line
