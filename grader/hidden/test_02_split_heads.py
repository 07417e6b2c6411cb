"""Hidden graders of lesson 02_split_heads (numpy).

Inputs are drawn afresh for every grading run; the "labelled" ones hold distinct numbers,
so a misplaced number is always visible. The oracle is the BERT-keras layout: consecutive
blocks for q/k/v, consecutive chunks of d features per head. A wrong answer is compared
with the outputs of the common mistakes (``suspect``): the one it matches is the hint.
"""

import numpy as np

from grader.testkit.framework import (
    check,
    close,
    diagnose,
    exercise,
    msg,
    numpy_only,
    rng,
    shape_of,
    suspect,
)

MISTAKES = {
    "qkv_interleaved": "q, k, v taken as every third column instead of consecutive blocks",
    "qkv_order": "q, k, v returned in the wrong order",
    "qkv_hardcoded_width": "the blocks have a hard-coded width instead of n_state",
    "split_no_transpose": "split by a reshape straight to [B, H, L, d], without the transpose",
    "split_head_fast_axis": "head as the fast axis: reshape to [B, L, d, H] instead of [B, L, H, d]",
    "split_d_h_swapped": "d and H swapped: the result is [B, d, L, H]",
    "split_k_ignored": "the k flag is ignored (keys not transposed)",
    "not_numpy": "a numpy exercise returns a torch tensor (or a list) instead of a numpy array",
    "split_k_wrong_layout": "with k=True the result is not [B, H, d, L]",
    "merge_no_transpose": "merged by a reshape without transposing back to [B, L, H, d]",
    "merge_head_fast_axis": "merged with the head as the fast axis (transpose to [B, L, d, H])",
    "merge_to_d": "merged to [B, L, d] instead of [B, L, H·d]",
}

#: What the lesson's text (both editions) asks of each exercise, each requirement with the
#: diagnoses that grade it: ids of MISTAKES, or the shared ``library_call`` and
#: ``changes_its_input`` (tests/grader/hidden/test_requirements.py: each one declared, and proven on this
#: exercise by a planted bug; every diagnosis answers some requirement).
REQUIREMENTS = {
    "split_qkv": {
        "q, k, v are three consecutive blocks of n_state columns (not every third column)":
            ("qkv_interleaved",),
        "each block is n_state (the argument) columns wide: [B, L, n_state]": ("qkv_hardcoded_width",),
        "returns (q, k, v): the first, second and third block, in that order": ("qkv_order",),
        "numpy in, numpy arrays out (the course's rule)": ("not_numpy",),
    },
    "split_heads": {
        "[B, L, D] -> [B, H, L, d]: reshape to [B, L, H, d], then transpose (a reshape alone mixes "
        "tokens)": ("split_no_transpose",),
        "head h holds the consecutive features h·d … (h+1)·d - 1 of every token": ("split_head_fast_axis",),
        "n_head heads of d = D // n_head features each": ("split_d_h_swapped",),
        "with k=True the keys come out [B, H, d, L], ready for q @ k": ("split_k_ignored", "split_k_wrong_layout"),
        "numpy in, numpy arrays out (the course's rule)": ("not_numpy",),
    },
    "merge_heads": {
        "[B, H, L, d] -> [B, L, H·d] (all heads side by side: 768 for BERT-base, not 64)": ("merge_to_d",),
        "token l holds head 0's d features, then head 1's, …": ("merge_head_fast_axis",),
        "the exact inverse of split_heads: transpose back to [B, L, H, d], then reshape":
            ("merge_no_transpose",),
        "numpy in, numpy arrays out (the course's rule)": ("not_numpy",),
    },
}


def call(sub, name, *args, **kwargs):
    """The notebook's ``name``; every array it returns must be numpy's (a numpy lesson)."""
    result = sub.call(name, *args, **kwargs)
    numpy_only(name, *(result if name == "split_qkv" and isinstance(result, (tuple, list)) else (result,)))
    return result


def labelled(n, *shape):
    """Distinct numbers in a random order: every number tells where it came from."""
    size = int(np.prod(shape))
    return (rng(n).permutation(size) + 1.0).reshape(shape)


def ref_split(x, n_head, k=False):
    B, L, D = x.shape
    return x.reshape(B, L, n_head, D // n_head).transpose((0, 2, 3, 1) if k else (0, 2, 1, 3))


def ref_merge(x):
    B, H, L, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, L, H * d)


def triple(result):
    check(isinstance(result, (tuple, list)) and len(result) == 3,
          msg("split_qkv should return three arrays (q, k, v)"))
    return result


# --- split_qkv ------------------------------------------------------------------------

def qkv_suspects(x, n_state, which):
    """What q (which=0), k (1) or v (2) is after the common split_qkv mistakes."""
    blocks = [x[..., i * n_state:(i + 1) * n_state] for i in range(3)]
    width = 4 if n_state != 4 else None
    return [
        suspect("qkv_interleaved", x[..., which::3],
                msg("q, k and v are every third column: the fused projection holds them as three consecutive blocks of n_state columns (q = x[..., :n_state], k the next block)")),
        suspect("qkv_hardcoded_width", x[..., which * width:(which + 1) * width] if width else None,
                msg("with n_state = {n_state} each block should be {n_state} columns wide: use the n_state argument, not a fixed width", n_state=n_state)),
    ] + [
        suspect("qkv_order", blocks[j], msg("the {which} returned is block {j} (the {letter} block): return q, k, v in that order, block 0, 1, 2", which='qkv'[which], j=j, letter='qkv'[j]))
        for j in range(3) if j != which
    ]


def check_qkv(sub, x, n_state, what):
    q, k, v = triple(call(sub, "split_qkv", x, n_state))
    for i, (got, name) in enumerate(((q, "q"), (k, "k"), (v, "v"))):
        close(got, x[..., i * n_state:(i + 1) * n_state],
              msg("{what}: {name} should be columns {first} to {last} (block {i} of n_state = {n_state} columns)", what=what, name=name, first=i * n_state, last=(i + 1) * n_state - 1, i=i, n_state=n_state), suspects=qkv_suspects(x, n_state, i))


@exercise("split_qkv", points=2)
def test_split_qkv_blocks_in_order(sub):
    check_qkv(sub, labelled(1, 2, 3, 12), 4, msg("for x of shape [2, 3, 12] and n_state = 4"))


@exercise("split_qkv", points=1)
def test_split_qkv_other_sizes(sub):
    check_qkv(sub, rng(2).normal(size=(1, 5, 15)), 5, msg("for x of shape [1, 5, 15] and n_state = 5"))


# --- split_heads ----------------------------------------------------------------------

def split_suspects(x, n_head, k=False):
    B, L, D = x.shape
    d = D // n_head
    fast = x.reshape(B, L, d, n_head).transpose((0, 3, 2, 1) if k else (0, 3, 1, 2))
    flat = x.reshape(B, n_head, L, d)
    return [
        suspect("split_no_transpose", flat.transpose(0, 1, 3, 2) if k else flat,
                msg("the heads mix tokens: a reshape straight to [B, H, L, d] keeps the numbers in their order; reshape to [B, L, H, d] (head h = features h·d … (h+1)·d - 1), then transpose to [B, H, L, d]")),
        suspect("split_head_fast_axis", fast,
                msg("head 0 holds features 0, {n_head}, {twice_n_head}, …: reshape to [B, L, H, d] (each head a consecutive chunk of d features), not [B, L, d, H]", n_head=n_head, twice_n_head=2 * n_head)),
        suspect("split_d_h_swapped", x.reshape(B, L, d, n_head).transpose((0, 2, 3, 1) if k else (0, 2, 1, 3)),
                msg("d and H are swapped: reshape to [B, L, H, d] with d = D // H, so that the head axis has H entries")),
        suspect("split_k_ignored", ref_split(x, n_head) if k else None,
                msg("with k=True the keys should come out transposed, [B, H, d, L], ready for q @ k (the k flag is ignored)")),
        suspect("split_k_wrong_layout", ref_split(x, n_head).transpose(0, 3, 1, 2) if k else None,
                msg("with k=True the result should be [B, H, d, L] (transpose [B, L, H, d] with (0, 2, 3, 1)), not [B, d, H, L]")),
    ]


@exercise("split_heads", points=1.5)
def test_split_heads_layout(sub):
    x = labelled(3, 2, 3, 8)                                  # B=2, L=3, D=8
    close(call(sub, "split_heads", x, 2), ref_split(x, 2),
          msg("split_heads of a [2, 3, 8] input with 2 heads should be [2, 2, 3, 4]: head h holds the consecutive features h·4 … h·4 + 3 of every token"), suspects=split_suspects(x, 2))


@exercise("split_heads", points=1)
def test_split_heads_many_heads(sub):
    x = rng(4).normal(size=(2, 5, 12))
    for n_head in (1, 3, 4, 12):
        close(call(sub, "split_heads", x, n_head), ref_split(x, n_head),
              msg("split_heads(x, {n_head}) of a [2, 5, 12] input should be [2, {n_head}, 5, {d_head}], head h holding features h·d … (h+1)·d - 1 of each token", n_head=n_head, d_head=12 // n_head),
              suspects=split_suspects(x, n_head))


@exercise("split_heads", points=1.5)
def test_split_heads_keys_transposed(sub):
    x = labelled(5, 2, 5, 6)
    close(call(sub, "split_heads", x, 3, k=True), ref_split(x, 3, k=True),
          msg("with k=True, [B, L, D] = [2, 5, 6] and 3 heads should give [B, H, d, L] = [2, 3, 2, 5], each head the transpose of the k=False head"), suspects=split_suspects(x, 3, k=True))


# --- merge_heads ----------------------------------------------------------------------

def merge_suspects(x):
    B, H, L, d = x.shape
    return [
        suspect("merge_no_transpose", x.reshape(B, L, H * d),
                msg("the merged tokens mix positions: a reshape of [B, H, L, d] straight to [B, L, H·d] keeps head order first; transpose back to [B, L, H, d], then reshape")),
        suspect("merge_head_fast_axis", x.transpose(0, 2, 3, 1).reshape(B, L, H * d),
                msg("token l of the merged output interleaves the heads feature by feature: it should be head 0's d features, then head 1's (transpose to [B, L, H, d], not [B, L, d, H])")),
    ]


def check_merge(sub, x, message):
    B, H, L, d = x.shape
    out = call(sub, "merge_heads", x)
    if shape_of(out) == (B, L, d) and H > 1:
        diagnose("merge_to_d", msg("merging [B, H, L, d] = {split_shape} should give [B, L, H·d] = {merged_shape}: all heads side by side, not [B, L, d] (the note's [B, L, 64] is a slip)", split_shape=[B, H, L, d], merged_shape=[B, L, H * d]))
    close(out, ref_merge(x), message, suspects=merge_suspects(x))


@exercise("merge_heads", points=1)
def test_merge_heads_layout(sub):
    check_merge(sub, labelled(6, 2, 3, 4, 5), msg("merging [B, H, L, d] = [2, 3, 4, 5] should give [2, 4, 15]: token l holds head 0's d features, then head 1's, then head 2's"))


@exercise("merge_heads", points=1)
def test_merge_inverts_split(sub):
    x = rng(7).normal(size=(3, 7, 8))
    for n_head in (1, 2, 4):
        check_merge(sub, ref_split(x, n_head), msg("merge_heads(split_heads(x, {n_head})) should give back x exactly: merge is the inverse of split", n_head=n_head))


@exercise("merge_heads", points=1)
def test_merge_heads_bert_sizes(sub):
    check_merge(sub, rng(8).normal(size=(1, 12, 3, 64)),
                msg("12 heads of 64 features merge into [B, L, 768]"))
