"""PyTorch mirrors of heddle's zoo language models, for bench/torch_compare.py.

Each module reproduces the op graph `heddle show MODEL --text FILE` prints for the same
configuration (src/ops/zoo/Transformers.cpp, Blocks.cpp): the same parameter shapes, the same
contractions, norms, activations and loss, written the way a PyTorch user would write them
(nn.Linear, matmul attention). Weights are drawn the way heddle's init_param draws them
(src/ops/TileInit.cpp: uniform in +-1/sqrt(fan_in) with fan_in the product of every dim but the
last of heddle's layout, gains 1, biases 0), so the first step's loss agrees in value, not only in
order of magnitude; the values themselves differ (different generators).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def _uniform_(t, fan_in):
    bound = 1.0 / math.sqrt(max(fan_in, 1))
    with torch.no_grad():
        t.uniform_(-bound, bound)
    return t


def _dense(i, o, bias):
    """heddle's `dense`: x @ w [in, out] (+ bias); nn.Linear keeps w as [out, in], same bound."""
    lin = nn.Linear(i, o, bias=bias)
    _uniform_(lin.weight, i)
    if bias:
        nn.init.zeros_(lin.bias)
    return lin


class Attention(nn.Module):
    """heddle's blocks::attention: q/k/v/o projections, scaled scores, causal mask, softmax;
    grouped-query when kv_heads < heads; rotary (interleaved pairs) when theta > 0."""

    def __init__(self, hidden, heads, kv_heads, bias, rope_theta, seq):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, hidden // heads
        self.q = _dense(hidden, hidden, bias)
        self.k = _dense(hidden, kv_heads * self.hd, bias)
        self.v = _dense(hidden, kv_heads * self.hd, bias)
        self.o = _dense(hidden, hidden, bias)
        self.register_buffer("mask", torch.ones(seq, seq, dtype=torch.bool).triu(1), persistent=False)
        self.rope = rope_theta > 0
        if self.rope:
            i = torch.arange(self.hd // 2, dtype=torch.float64)
            ang = torch.arange(seq, dtype=torch.float64)[:, None] * rope_theta ** (-2.0 * i / self.hd)
            self.register_buffer("cos", ang.cos().float()[:, None, :], persistent=False)
            self.register_buffer("sin", ang.sin().float()[:, None, :], persistent=False)

    def rotary(self, x):  # x [B, S, h, hd]; pairs (2i, 2i+1) rotated by pos * theta^(-2i/hd)
        x0, x1 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x0 * self.cos - x1 * self.sin, x0 * self.sin + x1 * self.cos), -1).flatten(-2)

    def forward(self, x):
        B, S, H = x.shape
        q = self.q(x).view(B, S, self.heads, self.hd)
        k = self.k(x).view(B, S, self.kv_heads, self.hd)
        v = self.v(x).view(B, S, self.kv_heads, self.hd)
        if self.rope:
            q, k = self.rotary(q), self.rotary(k)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        g = self.heads // self.kv_heads
        if g > 1:
            k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.hd))
        att = att.masked_fill(self.mask[:S, :S], float("-inf")).softmax(-1)
        return self.o((att @ v).transpose(1, 2).reshape(B, S, H))


def top2_gating(probs, capacity):
    """heddle's top2_gating kernel (src/ops/KernelWindow.cpp): per token its two most probable
    experts, weights p / (p1 + p2), slots filled in token order up to `capacity` per expert.
    Returns combine and dispatch [T, E, C]; no gradient (heddle treats the routes as constant)."""
    T, E = probs.shape
    top = probs.topk(2, dim=-1)
    e1, e2 = top.indices[:, 0], top.indices[:, 1]
    w = top.values / top.values.sum(-1, keepdim=True)
    oh1, oh2 = F.one_hot(e1, E), F.one_hot(e2, E)
    before = (oh1 + oh2).cumsum(0) - oh1 - oh2  # slots taken by earlier tokens
    pos1, pos2 = (before * oh1).sum(-1), (before * oh2).sum(-1)
    combine = torch.zeros(T, E, capacity + 1)
    dispatch = torch.zeros(T, E, capacity + 1)
    t = torch.arange(T)
    for e, pos, wk in ((e1, pos1, w[:, 0]), (e2, pos2, w[:, 1])):
        slot = pos.clamp(max=capacity)  # overflow lands in the dropped extra slot
        combine[t, e, slot] = wk
        dispatch[t, e, slot] = 1.0
    return combine[..., :capacity].contiguous(), dispatch[..., :capacity].contiguous()


class MoeMlp(nn.Module):
    """heddle's GShard MoE layer: softmax gate, top-2 dispatch into [E, C] slots, every expert a
    GELU MLP as batched einsums, combine back (dense dispatch/combine einsums, as heddle)."""

    def __init__(self, hidden, experts, ffn, tokens, capacity_factor=1.25):
        super().__init__()
        self.E = experts
        self.C = math.ceil(2.0 * tokens * capacity_factor / experts)
        self.gate = _dense(hidden, experts, False)
        self.w1 = nn.Parameter(_uniform_(torch.empty(experts, hidden, ffn), experts * hidden))
        self.w2 = nn.Parameter(_uniform_(torch.empty(experts, ffn, hidden), experts * ffn))

    def forward(self, h):
        B, S, H = h.shape
        t = h.reshape(B * S, H)
        with torch.no_grad():
            combine, dispatch = top2_gating(self.gate(t).softmax(-1), self.C)
        xin = torch.einsum("tec,th->ech", dispatch, t)
        hid = F.gelu(torch.bmm(xin, self.w1))
        out = torch.bmm(hid, self.w2)
        return torch.einsum("tec,ech->th", combine, out).reshape(B, S, H)


class LayerNorm(nn.LayerNorm):
    def __init__(self, h):
        super().__init__(h, eps=1e-5)


class RmsNorm(nn.Module):
    def __init__(self, h, eps=1e-5):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(h))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.gamma


class Gpt(nn.Module):
    """heddle's gpt (and, with experts, gshard_moe): pre-LayerNorm, learned positions, GELU MLP
    of 4h with biases (MoE: every odd layer's MLP is the MoE layer, ffn wide), tied head."""

    def __init__(self, layers, hidden, heads, seq, vocab, batch, experts=0, ffn=None):
        super().__init__()
        self.wte = nn.Parameter(_uniform_(torch.empty(vocab, hidden), vocab))
        self.wpe = nn.Parameter(_uniform_(torch.empty(seq, hidden), seq))
        ffn = ffn or 4 * hidden
        self.blocks = nn.ModuleList()
        for layer in range(layers):
            b = nn.Module()
            b.ln1, b.ln2 = LayerNorm(hidden), LayerNorm(hidden)
            b.attn = Attention(hidden, heads, heads, True, 0, seq)
            if experts and layer % 2 == 1:
                b.mlp = MoeMlp(hidden, experts, ffn, batch * seq)
            else:
                b.mlp = nn.Sequential(_dense(hidden, ffn, True), nn.GELU(), _dense(ffn, hidden, True))
            self.blocks.append(b)
        self.ln_f = LayerNorm(hidden)

    def forward(self, ids, labels):
        x = F.embedding(ids, self.wte) + self.wpe
        for b in self.blocks:
            x = x + b.attn(b.ln1(x))
            x = x + b.mlp(b.ln2(x))
        logits = self.ln_f(x) @ self.wte.t()
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


class Llama(nn.Module):
    """heddle's llama: RMSNorm, rotary, grouped-query attention without biases, SwiGLU MLP,
    untied head."""

    def __init__(self, layers, hidden, heads, kv_heads, ffn, seq, vocab, theta=10000.0):
        super().__init__()
        self.embed = nn.Parameter(_uniform_(torch.empty(vocab, hidden), vocab))
        self.blocks = nn.ModuleList()
        for _ in range(layers):
            b = nn.Module()
            b.attn_norm, b.mlp_norm = RmsNorm(hidden), RmsNorm(hidden)
            b.attn = Attention(hidden, heads, kv_heads, False, theta, seq)
            b.gate, b.up = _dense(hidden, ffn, False), _dense(hidden, ffn, False)
            b.down = _dense(ffn, hidden, False)
            self.blocks.append(b)
        self.norm = RmsNorm(hidden)
        self.lm_head = _dense(hidden, vocab, False)

    def forward(self, ids, labels):
        x = F.embedding(ids, self.embed)
        for b in self.blocks:
            x = x + b.attn(b.attn_norm(x))
            h = b.mlp_norm(x)
            x = x + b.down(F.silu(b.gate(h)) * b.up(h))
        logits = self.lm_head(self.norm(x))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


# heddle's presets (src/ops/zoo/Zoo.cpp) before the command line's overrides.
PRESETS = {
    "gpt-tiny": dict(family="gpt", layers=2, hidden=64, heads=4, seq=32, vocab=128, batch=2),
    "llama-tiny": dict(family="llama", layers=2, hidden=64, heads=4, kv_heads=2, ffn=172, seq=32,
                       vocab=128, batch=2),
    "moe-tiny": dict(family="moe", layers=4, hidden=64, heads=4, experts=4, ffn=256, seq=32,
                     vocab=128, batch=2),
}


def build(model, **over):
    """The torch mirror of heddle zoo `model` with heddle's overrides (layers, hidden, heads,
    seq, vocab, batch); returns (module, config)."""
    c = dict(PRESETS[model])
    c.update({k: v for k, v in over.items() if v is not None})
    f = c["family"]
    if f == "gpt":
        m = Gpt(c["layers"], c["hidden"], c["heads"], c["seq"], c["vocab"], c["batch"])
    elif f == "moe":
        m = Gpt(c["layers"], c["hidden"], c["heads"], c["seq"], c["vocab"], c["batch"],
                experts=c["experts"], ffn=c["ffn"])
    else:
        if "heads" in over and c["heads"] % c["kv_heads"]:
            c["kv_heads"] = c["heads"]
        m = Llama(c["layers"], c["hidden"], c["heads"], c["kv_heads"], c["ffn"], c["seq"],
                  c["vocab"])
    return m, c
