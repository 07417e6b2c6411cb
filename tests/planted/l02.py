"""Planted mistakes in lesson 02 (split_qkv, split_heads, merge_heads; numpy)."""

from planted import Variant, bug

LESSON = "02_split_heads"

BUGS = [
    # split_qkv
    bug("split_qkv", "qkv_interleaved", "interleaved instead of block split",
        ("q = x[:, :, :n_state]", "q = x[:, :, 0::3]"),
        ("k = x[:, :, n_state:2 * n_state]", "k = x[:, :, 1::3]"),
        ("v = x[:, :, 2 * n_state:3 * n_state]", "v = x[:, :, 2::3]")),
    bug("split_qkv", "qkv_order", "q and k swapped", ("return q, k, v", "return k, q, v")),
    bug("split_qkv", "qkv_order", "v and q swapped", ("return q, k, v", "return v, k, q")),
    bug("split_qkv", "qkv_hardcoded_width", "blocks of a hard-coded width", ("n_state:2 * n_state]", "4:8]"),
        ("q = x[:, :, :n_state]", "q = x[:, :, :4]"), ("v = x[:, :, 2 * n_state:3 * n_state]", "v = x[:, :, 8:]")),
    # split_heads
    bug("split_heads", "split_no_transpose", "reshape straight to [B, H, L, d] without transpose",
        ("new_x = x.reshape(B, L, n_head, D // n_head)           # [B, L, H, d]\n"
         "    return new_x.transpose((0, 2, 3, 1) if k else (0, 2, 1, 3))",
         "new_x = x.reshape(B, n_head, L, D // n_head)\n"
         "    return new_x.transpose(0, 1, 3, 2) if k else new_x")),
    bug("split_heads", "split_k_ignored", "k flag ignored", ("(0, 2, 3, 1) if k else (0, 2, 1, 3)", "(0, 2, 1, 3)")),
    bug("split_heads", "split_k_wrong_layout", "k flag gives [B, H, L, d] transposed the wrong way",
        ("(0, 2, 3, 1) if k else", "(0, 3, 2, 1) if k else")),
    bug("split_heads", "split_head_fast_axis", "head as the fast axis (reshape [B, L, d, H])",
        ("new_x = x.reshape(B, L, n_head, D // n_head)           # [B, L, H, d]\n"
         "    return new_x.transpose((0, 2, 3, 1) if k else (0, 2, 1, 3))",
         "new_x = x.reshape(B, L, D // n_head, n_head)\n"
         "    return new_x.transpose((0, 3, 2, 1) if k else (0, 3, 1, 2))")),
    bug("split_heads", "split_d_h_swapped", "d and H confused (reshape [B, L, d, H] read as heads)",
        ("x.reshape(B, L, n_head, D // n_head)", "x.reshape(B, L, D // n_head, n_head)")),
    # merge_heads
    bug("merge_heads", "merge_no_transpose", "reshape without transposing back",
        ("return x.transpose(0, 2, 1, 3).reshape(B, L, H * d)", "return x.reshape(B, L, H * d)")),
    bug("merge_heads", "merge_head_fast_axis", "wrong permutation (head as the fast axis)",
        ("x.transpose(0, 2, 1, 3)", "x.transpose(0, 2, 3, 1)")),
    bug("merge_heads", "merge_to_d", "merged to [B, L, d] (the source note's slip)",
        ("return x.transpose(0, 2, 1, 3).reshape(B, L, H * d)",
         "return x.transpose(0, 2, 1, 3).mean(axis=2)")),
    bug("split_heads", "changes_its_input", "reshapes x in place (x.shape = ...)",
        ("new_x = x.reshape(B, L, n_head, D // n_head)", "x.shape = (B, L, n_head, D // n_head)\n    new_x = x")),
    bug("split_qkv", "not_numpy", "q, k, v returned as torch tensors",
        ("return q, k, v", "import torch\n    return torch.as_tensor(q), torch.as_tensor(k), torch.as_tensor(v)")),
    bug("split_heads", "not_numpy", "split in torch, a tensor returned",
        ("return new_x.transpose((0, 2, 3, 1) if k else (0, 2, 1, 3))",
         "import torch\n    return torch.as_tensor(new_x).permute((0, 2, 3, 1) if k else (0, 2, 1, 3))")),
    bug("merge_heads", "not_numpy", "merged heads returned as a nested list",
        ("return x.transpose(0, 2, 1, 3).reshape(B, L, H * d)", "return x.transpose(0, 2, 1, 3).reshape(B, L, H * d).tolist()")),
]

ALTERNATIVES = [
    Variant("split_qkv", "np.split into three", source="""
def split_qkv(x, n_state):
    q, k, v = np.split(x, [n_state, 2 * n_state], axis=-1)
    return q, k, v
"""),
    Variant("split_qkv", "ellipsis slicing, returns a list", source="""
def split_qkv(x, n_state):
    return [x[..., i * n_state:(i + 1) * n_state] for i in range(3)]
"""),
    Variant("split_heads", "swapaxes", source="""
def split_heads(x, n_head, k=False):
    B, L, D = x.shape
    h = np.swapaxes(x.reshape(B, L, n_head, -1), 1, 2)
    return np.swapaxes(h, 2, 3) if k else h
"""),
    Variant("split_heads", "moveaxis", source="""
def split_heads(x, n_head, k=False):
    *lead, L, D = x.shape
    h = np.moveaxis(x.reshape(*lead, L, n_head, D // n_head), -2, -3)
    return np.moveaxis(h, -2, -1) if k else h
"""),
    Variant("split_heads", "einsum over an identity", source="""
def split_heads(x, n_head, k=False):
    B, L, D = x.shape
    y = x.reshape(B, L, n_head, D // n_head)
    return np.einsum("blhd->bhdl" if k else "blhd->bhld", y).copy()
"""),
    Variant("merge_heads", "swapaxes and -1", source="""
def merge_heads(x):
    B = x.shape[0]
    return np.swapaxes(x, 1, 2).reshape(B, x.shape[2], -1)
"""),
    Variant("merge_heads", "concatenate the heads", source="""
def merge_heads(x):
    return np.concatenate([x[:, h] for h in range(x.shape[1])], axis=-1)
"""),
    Variant("merge_heads", "einsum", source="""
def merge_heads(x):
    B, H, L, d = x.shape
    return np.einsum("bhld->blhd", x).reshape(B, L, H * d)
"""),
]

# What each planted mistake earns on its exercise (the rubric in CONTRIBUTING):
SCORES = {
    ('split_qkv', 'interleaved instead of block split'): 0,
    ('split_qkv', 'q and k swapped'): 0,
    ('split_qkv', 'v and q swapped'): 0,
    ('split_qkv', 'blocks of a hard-coded width'): 2,
    ('split_heads', 'reshape straight to [B, H, L, d] without transpose'): 0,
    ('split_heads', 'k flag ignored'): 2.5,
    ('split_heads', 'k flag gives [B, H, L, d] transposed the wrong way'): 2.5,
    ('split_heads', 'head as the fast axis (reshape [B, L, d, H])'): 0,
    ('split_heads', 'd and H confused (reshape [B, L, d, H] read as heads)'): 0,
    ('merge_heads', 'reshape without transposing back'): 0,
    ('merge_heads', 'wrong permutation (head as the fast axis)'): 0,
    ('merge_heads', "merged to [B, L, d] (the source note's slip)"): 0,
}
