#!/usr/bin/env python3
"""Golden data for the causal language models (issue 18): gpt2, tost_lm, crate_lm.

Run with a Python that has torch, numpy and safetensors (e.g. /tmp/torchenv/bin/python):

    python tests/golden/make_lm.py [outdir]        (default: the directory of this script)

The reference modules below are written from SPEC.md section 1.5, issue 18 and the reference
repositories (read, not copied): nanoGPT's model.py (GPT, Block, CausalSelfAttention, MLP,
LayerNorm with optional bias, eps 1e-5, exact GELU), the ToST language code
(RobinWu218/ToST, tost_lang/model_TSSA.py: CausalSelfAttention_TSSA) and Causal-CRATE as issue 18
describes CRATE's model/crate_gpt.py. Module names follow the references so that `state_dict()`
gives the checkpoint keys:

  gpt2, tost_lm (nanoGPT layout):
    transformer.wte.weight (V,d), transformer.wpe.weight (block_size,d),
    transformer.h.{i}.ln_1.{weight,bias}, .attn.c_attn.{weight,bias}, .attn.c_proj.{weight,bias},
    .ln_2.*, .mlp.c_fc.*, .mlp.c_proj.*, transformer.ln_f.*, lm_head.weight (tied to wte)
    gpt2:    attn.c_attn (3d,d) split [q|k|v], causal softmax, scale p^-1/2, plus the causal-mask
             buffer attn.bias (1,1,block_size,block_size) (nanoGPT registers it on its non-flash path,
             which is the path used here)
    tost_lm: attn.c_attn (d,d), attn.temp (K,1), attn.denom_bias (K,block_size,1), attn.c_proj (d,d);
             no mask buffer (the reference registers none)
  crate_lm: transformer.wte, transformer.wpe, transformer.h.{i}.prenorm_1.*, .attn.c_attn.weight (d,d, no
    bias; q = k = v = w, causal softmax(w w^T p^-1/2) w), .attn.c_proj.{weight,bias}, .attn.bias (mask),
    .prenorm_2.*, .ista.weight (d,d) (ISTA step 0.1, lambda 0.1, as CRATE's FeedForward);
    x = x + attn(prenorm_1 x); x = ista(prenorm_2 x); logits = lm_head(x) (no final LayerNorm),
    lm_head tied to wte.

Differences between the references and SPEC.md / issue 18 (noted, the issue's layout is followed):
  * ToST's tost_lang/model_TSSA.py Block has two layer scales, gamma1 and gamma2 (d), initialised to
    1e-5: x = x + gamma1 * attn(ln_1 x); x = x + gamma2 * mlp(ln_2 x), and saves them in its
    state_dict (keys transformer.h.{i}.gamma1/gamma2). Issue 18 and wbcl's lm.h have no layer scales;
    these modules follow the issue (equivalently gamma = 1). A real ToST-LM checkpoint would need them.
  * nanoGPT with PyTorch >= 2 takes the flash path and registers no attn.bias buffer; the buffer is
    saved here for gpt2 and crate_lm (the non-flash path) so that the C loader's "accept and ignore"
    path is tested.
  * crate_lm was first written from the issue's description and CRATE's model/crate.py (MSSA with
    q = k = v, ISTA). Checked afterwards against Ma-Lab-Berkeley/CRATE model/crate_gpt.py (commit
    f33d737): its key set is exactly the files' (prenorm_1/2 with biases, attn.c_attn without bias,
    attn.c_proj with bias, attn.bias buffer, ista.weight, wte/wpe, lm_head tied), and a float64
    forward written from its Block (LayerNorm eps 1e-5; att = qkv qkvᵀ / sqrt(p), causal softmax;
    ISTA relu(x + 0.1 (x W − x Wᵀ W) − 0.01); no final LayerNorm) gives the golden logits of
    c0, c1, c2 within 2.2e-7 (their float32 rounding) (2026-11-27, a one-off script, not kept).

Sizes (the contract): vocab 97, block_size 16, dim 48, heads 3 (p 16), depth 2. gpt2 with bias=true,
tost_lm with bias=false, crate_lm with LayerNorm and c_proj biases (bias=true). Weights random
(seeded); LayerNorm affine parameters, temperatures and denom_bias perturbed away from their initial
values so that a wrong use shows. Everything is stored in float32; the references run in float64
on exactly those values and the results are rounded once.

Output per model M:
  lm_M.safetensors          the state_dict (F32) with metadata config = JSON {model, vocab, block_size,
                            dim, depth, heads, bias}; gpt2 WITHOUT lm_head.weight (tied: wte serves),
                            tost_lm and crate_lm WITH it.
  lm_M_golden.safetensors   c0.ids I64 (2,16), c1.ids I64 (1,1), c2.ids I64 (3,7), cI.logits F32 (B,T,97);
                            gen.prompt I64 (2,3), gen.ids I64 (2,16): the prompt and 13 greedy tokens
                            (argmax of the full forward's last row over the growing sequence).
"""
import json
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import save_file

DT = torch.float64
V, BLOCK, DIM, HEADS, DEPTH = 97, 16, 48, 3, 2


class LayerNorm(nn.Module):  # nanoGPT: LayerNorm with an optional bias, eps 1e-5
    def __init__(self, n, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.bias = nn.Parameter(torch.zeros(n)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, 1e-5)


def causal_mask(T):
    return torch.tril(torch.ones(T, T)).view(1, 1, T, T)


class SoftmaxAttention(nn.Module):  # nanoGPT CausalSelfAttention (manual path)
    def __init__(self, d, K, block, bias):
        super().__init__()
        self.K = K
        self.c_attn = nn.Linear(d, 3 * d, bias=bias)
        self.c_proj = nn.Linear(d, d, bias=bias)
        self.register_buffer("bias", causal_mask(block))

    def forward(self, x):
        B, T, d = x.shape
        q, k, v = self.c_attn(x).split(d, dim=2)
        q, k, v = (t.reshape(B, T, self.K, d // self.K).transpose(1, 2) for t in (q, k, v))
        a = (q @ k.transpose(-1, -2)) / math.sqrt(d // self.K)
        a = a.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf")).softmax(-1)
        y = (a @ v).transpose(1, 2).reshape(B, T, d)
        return self.c_proj(y)


class TSSAAttention(nn.Module):  # ToST CausalSelfAttention_TSSA, SPEC 1.5
    def __init__(self, d, K, block, bias):
        super().__init__()
        self.K = K
        self.c_attn = nn.Linear(d, d, bias=bias)
        self.c_proj = nn.Linear(d, d, bias=bias)
        self.temp = nn.Parameter(torch.ones(K, 1))
        self.denom_bias = nn.Parameter(torch.zeros(K, block, 1))

    def forward(self, x):
        B, T, d = x.shape
        w = self.c_attn(x).reshape(B, T, self.K, d // self.K).transpose(1, 2)  # (B,K,T,p)
        w2 = w * w
        S = torch.cumsum(w2, dim=2).clamp_min(1e-12)
        wn = w2 / S + self.denom_bias[:, :T, :]
        Pi = torch.softmax(wn.sum(-1) * self.temp, dim=1)  # (B,K,T), softmax over heads
        Q = torch.cumsum(w2 * Pi.unsqueeze(-1), dim=2)
        P = torch.cumsum(Pi, dim=-1).unsqueeze(-1)
        y = -(w * Pi.unsqueeze(-1)) / (1.0 + Q / (P + 1e-8))
        return self.c_proj(y.transpose(1, 2).reshape(B, T, d))


class MSSAAttention(nn.Module):  # Causal-CRATE: q = k = v = w
    def __init__(self, d, K, block):
        super().__init__()
        self.K = K
        self.c_attn = nn.Linear(d, d, bias=False)
        self.c_proj = nn.Linear(d, d, bias=True)
        self.register_buffer("bias", causal_mask(block))

    def forward(self, x):
        B, T, d = x.shape
        w = self.c_attn(x).reshape(B, T, self.K, d // self.K).transpose(1, 2)
        a = (w @ w.transpose(-1, -2)) / math.sqrt(d // self.K)
        a = a.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf")).softmax(-1)
        return self.c_proj((a @ w).transpose(1, 2).reshape(B, T, d))


class MLP(nn.Module):
    def __init__(self, d, bias):
        super().__init__()
        self.c_fc = nn.Linear(d, 4 * d, bias=bias)
        self.c_proj = nn.Linear(4 * d, d, bias=bias)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x)))  # exact (erf) GELU


class ISTA(nn.Module):  # CRATE FeedForward: relu(x + eta (x D - x D^T D) - eta lambda)
    def __init__(self, d, step=0.1, lambd=0.1):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(d, d))
        nn.init.kaiming_uniform_(self.weight)
        self.step, self.lambd = step, lambd

    def forward(self, x):
        x1 = F.linear(x, self.weight)
        grad = F.linear(x, self.weight.t()) - F.linear(x1, self.weight.t())
        return F.relu(x + self.step * grad - self.step * self.lambd)


class Block(nn.Module):
    def __init__(self, kind, d, K, block, bias):
        super().__init__()
        self.kind = kind
        if kind == "crate_lm":
            self.prenorm_1 = LayerNorm(d, bias)
            self.attn = MSSAAttention(d, K, block)
            self.prenorm_2 = LayerNorm(d, bias)
            self.ista = ISTA(d)
        else:
            self.ln_1 = LayerNorm(d, bias)
            self.attn = (SoftmaxAttention if kind == "gpt2" else TSSAAttention)(d, K, block, bias)
            self.ln_2 = LayerNorm(d, bias)
            self.mlp = MLP(d, bias)

    def forward(self, x):
        if self.kind == "crate_lm":
            x = x + self.attn(self.prenorm_1(x))
            return self.ista(self.prenorm_2(x))
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class LM(nn.Module):
    def __init__(self, kind, vocab, block, d, depth, K, bias):
        super().__init__()
        self.kind = kind
        mods = dict(wte=nn.Embedding(vocab, d), wpe=nn.Embedding(block, d),
                    h=nn.ModuleList([Block(kind, d, K, block, bias) for _ in range(depth)]))
        if kind != "crate_lm":
            mods["ln_f"] = LayerNorm(d, bias)
        self.transformer = nn.ModuleDict(mods)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # tied

    def forward(self, idx):
        T = idx.shape[1]
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(T))
        for b in self.transformer.h:
            x = b(x)
        if self.kind != "crate_lm":
            x = self.transformer.ln_f(x)
        return self.lm_head(x)


def perturb(m, gen):
    with torch.no_grad():
        for name, p in m.named_parameters():
            r = torch.randn(p.shape, generator=gen, dtype=DT)
            if name.endswith("wte.weight") or name.endswith("wpe.weight"):
                p.copy_(0.3 * r)  # logits of order a few units (lm_head is tied to wte)
            elif name.endswith("temp"):
                p.copy_(1.0 + 0.4 * r)
            elif name.endswith("denom_bias"):
                p.copy_(0.3 * r)
            elif ("ln_" in name or "prenorm" in name) and name.endswith("weight"):
                p.copy_(1.0 + 0.2 * r)
            elif name.endswith("bias"):
                p.copy_(0.1 * r)
            elif p.dim() == 2:  # Linear / ISTA weights: std 1/sqrt(fan_in)
                p.copy_(r / math.sqrt(p.shape[1]))


def state_f32(m, with_head):
    out = {}
    for k, v in m.state_dict().items():
        if k == "lm_head.weight" and not with_head:
            continue
        out[k] = v.detach().to(torch.float32).contiguous().clone()
    if with_head:  # safetensors refuses shared storage
        out["transformer.wte.weight"] = out["lm_head.weight"].clone()
    return out


def make(outdir, kind, bias, with_head, gen):
    torch.manual_seed(18)
    m = LM(kind, V, BLOCK, DIM, DEPTH, HEADS, bias).to(DT)
    perturb(m, gen)
    state = state_f32(m, with_head)
    # the reference runs in float64 on exactly the float32 values
    m.load_state_dict({k: v.to(DT) for k, v in m.state_dict().items()} |
                      {k: v.to(DT) for k, v in state.items()}, strict=True)
    m.eval()
    cfg = dict(model=kind, vocab=V, block_size=BLOCK, dim=DIM, depth=DEPTH, heads=HEADS, bias=bias)
    meta = {"config": json.dumps(cfg)}
    save_file(state, os.path.join(outdir, f"lm_{kind}.safetensors"), metadata=meta)
    gold = {}
    with torch.no_grad():
        for i, (B, T) in enumerate([(2, BLOCK), (1, 1), (3, 7)]):
            ids = torch.randint(0, V, (B, T), generator=gen)
            gold[f"c{i}.ids"] = ids
            gold[f"c{i}.logits"] = m(ids).to(torch.float32).contiguous()
        seq = torch.randint(0, V, (2, 3), generator=gen)
        gold["gen.prompt"] = seq.clone()
        gap = math.inf  # smallest top-1 / top-2 logit margin met while generating (no near ties)
        while seq.shape[1] < BLOCK:
            last = m(seq)[:, -1, :]
            top2 = last.topk(2, dim=-1).values
            gap = min(gap, float((top2[:, 0] - top2[:, 1]).min()))
            nxt = last.argmax(-1, keepdim=True)
            seq = torch.cat([seq, nxt], dim=1)
        gold["gen.ids"] = seq.contiguous()
    save_file(gold, os.path.join(outdir, f"lm_{kind}_golden.safetensors"), metadata=meta)
    lg = gold["c0.logits"]
    print(kind, "keys", len(state), "logits std %.3f max %.3f" % (lg.std(), lg.abs().max()),
          "min argmax margin %.2e" % gap, "gen", seq.tolist())
    assert gap > 1e-3, "near tie in greedy generation: change the seed"


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    gen = torch.Generator().manual_seed(18)
    make(outdir, "gpt2", True, False, gen)
    make(outdir, "tost_lm", False, True, gen)
    make(outdir, "crate_lm", True, True, gen)


if __name__ == "__main__":
    main()
