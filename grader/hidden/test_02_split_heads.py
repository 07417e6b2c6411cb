"""Hidden graders of lesson 02_split_heads (numpy).

Inputs are fixed arrays whose entries name their own position (so a misplaced number is
always visible); the oracle is the BERT-keras layout: consecutive blocks for q/k/v,
consecutive chunks of d features per head.
"""

import numpy as np

from grader.framework import check, close, exercise, shape_of


def labelled(*shape):
    """Entries 0, 1, 2, ... in memory order: every number tells where it came from."""
    return np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)


RNG = np.random.default_rng(20190602)


def ref_split(x, n_head, k=False):
    B, L, D = x.shape
    return x.reshape(B, L, n_head, D // n_head).transpose((0, 2, 3, 1) if k else (0, 2, 1, 3))


def ref_merge(x):
    B, H, L, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, L, H * d)


def triple(result, message):
    check(isinstance(result, (tuple, list)) and len(result) == 3, message)
    return result


# --- split_qkv ------------------------------------------------------------------------

@exercise("split_qkv", points=1)
def test_split_qkv_blocks(sub):
    x = labelled(2, 3, 12)
    q, k, v = triple(sub.call("split_qkv", x, 4), "split_qkv should return three arrays (q, k, v)")
    for t, name in ((q, "q"), (k, "k"), (v, "v")):
        check(shape_of(t) == (2, 3, 4),
              f"{name} should be [B, L, n_state] = [2, 3, 4] for x of shape [2, 3, 12], got {shape_of(t)}")
    close(q, x[:, :, 0:4], "q should be the first block of n_state consecutive columns "
          "(x[:, :, :n_state]), not every third column")


@exercise("split_qkv", points=1)
def test_split_qkv_order(sub):
    x = labelled(2, 3, 12)
    q, k, v = triple(sub.call("split_qkv", x, 4), "split_qkv should return three arrays (q, k, v)")
    close(q, x[:, :, 0:4], "the first array returned should be q: the first n_state columns")
    close(k, x[:, :, 4:8], "the second array returned should be k: columns n_state to 2·n_state "
          "(return q, k, v in that order, as consecutive blocks)")
    close(v, x[:, :, 8:12], "the third array returned should be v: the last n_state columns")


@exercise("split_qkv", points=1)
def test_split_qkv_other_sizes(sub):
    x = RNG.normal(size=(1, 5, 15))
    q, k, v = triple(sub.call("split_qkv", x, 5), "split_qkv should return three arrays (q, k, v)")
    close(q, x[..., :5], "with n_state = 5, q should be x[:, :, :5]: use the n_state argument")
    close(k, x[..., 5:10], "with n_state = 5, k should be x[:, :, 5:10]")
    close(v, x[..., 10:], "with n_state = 5, v should be x[:, :, 10:15]")


# --- split_heads ----------------------------------------------------------------------

@exercise("split_heads", points=1.5)
def test_split_heads_layout(sub):
    x = labelled(2, 3, 8)                                    # B=2, L=3, D=8
    out = sub.call("split_heads", x, 2)
    check(shape_of(out) == (2, 2, 3, 4),
          f"[B, L, D] = [2, 3, 8] with 2 heads should give [B, H, L, d] = [2, 2, 3, 4], got {shape_of(out)}")
    out = np.asarray(out)
    # row l of head h must be token l's features h·d ... (h+1)·d - 1
    for h in range(2):
        if not np.array_equal(out[:, h], x[:, :, 4 * h:4 * h + 4]):
            if np.array_equal(out.reshape(-1), x.reshape(-1)):
                check(False, "the heads mix tokens: a reshape straight to [B, H, L, d] does not "
                      "move the numbers; reshape to [B, L, H, d], then transpose to [B, H, L, d]")
            check(False, f"head {h} should hold the consecutive features {4 * h}…{4 * h + 3} of "
                  f"every token (reshape to [B, L, H, d], not [B, L, d, H])")


@exercise("split_heads", points=1)
def test_split_heads_many_heads(sub):
    x = RNG.normal(size=(2, 5, 12))
    for n_head in (1, 3, 4, 12):
        close(sub.call("split_heads", x, n_head), ref_split(x, n_head),
              f"split_heads(x, {n_head}) of a [2, 5, 12] input should be [2, {n_head}, 5, "
              f"{12 // n_head}], head h holding features h·d … (h+1)·d - 1 of each token")


@exercise("split_heads", points=1.5)
def test_split_heads_keys_transposed(sub):
    x = labelled(2, 5, 6)
    kh = sub.call("split_heads", x, 3, k=True)
    check(shape_of(kh) == (2, 3, 2, 5),
          f"with k=True, [B, L, D] = [2, 5, 6] and 3 heads should give [B, H, d, L] = [2, 3, 2, 5] "
          f"(the keys come out transposed), got {shape_of(kh)}")
    close(kh, ref_split(x, 3, k=True),
          "with k=True each head should be the transpose of the k=False head: permute to "
          "[0, 2, 3, 1]")
    q = RNG.normal(size=(2, 5, 6))
    qh = ref_split(q, 3)
    close(qh @ np.asarray(kh), np.einsum("bhld,bhmd->bhlm", qh, ref_split(x, 3)),
          "q @ split_heads(k, H, k=True) should give the [B, H, L, L] per-head dot products")


# --- merge_heads ----------------------------------------------------------------------

@exercise("merge_heads", points=1)
def test_merge_heads_layout(sub):
    x = labelled(2, 3, 4, 5)                                 # B=2, H=3, L=4, d=5
    out = sub.call("merge_heads", x)
    check(shape_of(out) == (2, 4, 15),
          f"merging [B, H, L, d] = [2, 3, 4, 5] should give [B, L, H·d] = [2, 4, 15] (all heads "
          f"concatenated, not [B, L, d]), got {shape_of(out)}")
    out = np.asarray(out)
    if np.array_equal(out.reshape(-1), x.reshape(-1)):
        check(False, "the merged tokens mix positions: transpose [B, H, L, d] back to [B, L, H, d] "
              "before reshaping to [B, L, H·d]")
    close(out, ref_merge(x), "token l of the merged output should be head 0's d features, then head "
          "1's, and so on (transpose to [B, L, H, d], then reshape)")


@exercise("merge_heads", points=1)
def test_merge_inverts_split(sub):
    x = RNG.normal(size=(3, 7, 8))
    for n_head in (1, 2, 4):
        close(sub.call("merge_heads", ref_split(x, n_head)), x,
              f"merge_heads(split_heads(x, {n_head})) should give back x exactly: merge must be "
              f"the inverse of split")


@exercise("merge_heads", points=1)
def test_merge_heads_bert_sizes(sub):
    x = RNG.normal(size=(1, 12, 3, 64))
    out = sub.call("merge_heads", x)
    check(shape_of(out) == (1, 3, 768),
          f"12 heads of 64 features merge into [B, L, 768] (the note's [B, L, 64] is a slip), "
          f"got {shape_of(out)}")
    close(out, ref_merge(x), "merging 12 heads of 64 features gives the wrong values")
