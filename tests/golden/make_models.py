#!/usr/bin/env python3
"""Golden data for the CRATE and ToST vision models (issue 4), llm.c style.

Run with a Python that has torch, numpy and safetensors (e.g. /tmp/torchenv/bin/python):

    python tests/golden/make_models.py [outdir]        (default: the directory of this script)

The reference modules below are written from SPEC.md sections 1.2, 1.4, 2 and 6.2 and from the
seeds' pseudocode (CRATE paper App. B; ToST paper App. C and E; XCiT, whose non-attention layers
ToST keeps, minus LPI). Module and parameter names follow the reference repositories, so that
`state_dict()` gives the checkpoint key names (SPEC 6.2):

  CRATE (Ma-Lab-Berkeley/CRATE, model/crate.py):
    to_patch_embedding.{1,3}.{weight,bias}   LayerNorm(patch_dim), LayerNorm(dim)   (eps 1e-5)
    to_patch_embedding.2.{weight,bias}       Linear(patch_dim, dim)
    cls_token (1,1,d), pos_embedding (1,N+1,d)
    transformer.layers.{i}.0.norm.*, .0.fn.qkv.weight, .0.fn.to_out.0.{weight,bias}     (MSSA)
    transformer.layers.{i}.1.norm.*, .1.fn.weight                                        (ISTA)
    mlp_head.0.* (LayerNorm), mlp_head.1.* (Linear)
  ToST (RobinWu218/ToST, tost_cab.py on XCiT):
    patch_embed.proj.{2j}.0.weight (conv3x3 s2 p1, no bias), patch_embed.proj.{2j}.1.* (BatchNorm),
        GELU between the convs (4 convs for patch 16, 3 for patch 8)
    pos_embeder.token_projection.{weight,bias}  (1x1 conv from 64 Fourier features)
    blocks.{i}.{norm1,norm2}.*, blocks.{i}.attn.{qkv.weight,qkv.bias,temp,to_out.0.*},
        blocks.{i}.{gamma1,gamma2}, blocks.{i}.mlp.{fc1,fc2}.*
    cls_token, cls_attn_blocks.{0,1}.{norm1,norm2,attn.qkv,attn.proj,gamma1,gamma2,mlp.fc1,mlp.fc2}
    norm.*, head.*     (LayerNorm eps 1e-6 everywhere in ToST, as XCiT's default norm_layer)

Class-attention quirk (XCiT ClassAttentionBlock with tokens_norm=True, kept by ToST): ClassAttention
returns its own *input* (i.e. LN1 x) for the patch tokens; then x = LN2(x + g1 * that) over all tokens;
the residual `x_res + cat(g2 * mlp(cls), x[:, 1:])` then adds the patch tokens to themselves. Patch
tokens after a class-attention block are therefore 2 * LN2(x + g1 * LN1(x)). We reproduce that.

Weights are random (seeded), with LayerNorm/BatchNorm affine parameters, running statistics, layer
scales and TSSA temperatures all perturbed away from their initial values so that a wrong use of any
of them shows up in the outputs. Everything is float32, computed in float64 (the reference modules
run in double and the result is rounded once), so the golden values carry no float32 rounding of
their own.

Output per model NAME (crate, tost16, tost8):
  NAME.safetensors          the weights, keys as the reference state_dict (F32; BN num_batches_tracked I64)
  NAME_golden.safetensors   input "image" (B,3,H,W) and every intermediate:
      crate: embed (B,N+1,d), layer{i}.half (z + MSSA(LN z)), layer{i}.out (ISTA), logits (B,classes)
      tost:  patch (conv stack output, (B,N,d)), pos (N,d), embed (patch + pos), block{i}.out,
             cls{j}.in, cls{j}.out, feature (final LN on CLS), logits
  and a "config" metadata entry (JSON) with the hyper-parameters.
"""
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import save_file

DT = torch.float64


# ---------------------------------------------------------------- CRATE (crate.py)
class PreNorm(nn.Module):
    def __init__(self, dim, fn):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fn = fn

    def forward(self, x):
        return self.fn(self.norm(x))


class CrateAttention(nn.Module):  # MSSA, SPEC 1.2
    def __init__(self, dim, heads, dim_head):
        super().__init__()
        inner = heads * dim_head
        self.heads = heads
        self.scale = dim_head ** -0.5
        self.qkv = nn.Linear(dim, inner, bias=False)
        self.to_out = nn.Sequential(nn.Linear(inner, dim), nn.Dropout(0.0))

    def forward(self, x):
        b, n, _ = x.shape
        w = self.qkv(x).reshape(b, n, self.heads, -1).permute(0, 2, 1, 3)
        attn = torch.softmax(w @ w.transpose(-1, -2) * self.scale, dim=-1)
        out = (attn @ w).permute(0, 2, 1, 3).reshape(b, n, -1)
        return self.to_out(out)


class CrateISTA(nn.Module):  # FeedForward, SPEC 2
    def __init__(self, dim, step_size=0.1, lambd=0.1):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(dim, dim))
        nn.init.kaiming_uniform_(self.weight)
        self.step_size = step_size
        self.lambd = lambd

    def forward(self, x):
        x1 = F.linear(x, self.weight, bias=None)          # x W^T   (D z)
        grad_1 = F.linear(x1, self.weight.t(), bias=None)  # x W^T W
        grad_2 = F.linear(x, self.weight.t(), bias=None)   # x W     (D^T z)
        grad_update = self.step_size * (grad_2 - grad_1) - self.step_size * self.lambd
        return F.relu(x + grad_update)


class CrateTransformer(nn.Module):
    def __init__(self, dim, depth, heads, dim_head):
        super().__init__()
        self.layers = nn.ModuleList([
            nn.ModuleList([PreNorm(dim, CrateAttention(dim, heads, dim_head)), PreNorm(dim, CrateISTA(dim))])
            for _ in range(depth)])

    def forward(self, x, rec):
        for i, (attn, ff) in enumerate(self.layers):
            half = attn(x) + x
            x = ff(half)
            rec[f"layer{i}.half"] = half
            rec[f"layer{i}.out"] = x
        return x


class Rearrange(nn.Module):  # 'b c (h p1) (w p2) -> b (h w) (p1 p2 c)'
    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, img):
        b, c, H, W = img.shape
        p = self.p
        x = img.reshape(b, c, H // p, p, W // p, p).permute(0, 2, 4, 3, 5, 1)
        return x.reshape(b, (H // p) * (W // p), p * p * c)


class CRATE(nn.Module):
    def __init__(self, image_size, patch_size, num_classes, dim, depth, heads, dim_head, channels=3):
        super().__init__()
        n = (image_size // patch_size) ** 2
        patch_dim = channels * patch_size * patch_size
        self.to_patch_embedding = nn.Sequential(Rearrange(patch_size), nn.LayerNorm(patch_dim),
                                                nn.Linear(patch_dim, dim), nn.LayerNorm(dim))
        self.pos_embedding = nn.Parameter(torch.randn(1, n + 1, dim))
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim))
        self.transformer = CrateTransformer(dim, depth, heads, dim_head)
        self.mlp_head = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, num_classes))

    def forward(self, img, rec):
        x = self.to_patch_embedding(img)
        b, n, _ = x.shape
        x = torch.cat((self.cls_token.expand(b, -1, -1), x), dim=1)
        x = x + self.pos_embedding[:, :n + 1]
        rec["embed"] = x
        x = self.transformer(x, rec)
        logits = self.mlp_head(x[:, 0])
        rec["logits"] = logits
        return logits


# ---------------------------------------------------------------- ToST (tost_cab.py / XCiT)
def conv3x3(cin, cout, stride=1):
    return nn.Sequential(nn.Conv2d(cin, cout, kernel_size=3, stride=stride, padding=1, bias=False),
                         nn.BatchNorm2d(cout))


class ConvPatchEmbed(nn.Module):
    def __init__(self, patch_size, embed_dim):
        super().__init__()
        if patch_size == 16:
            self.proj = nn.Sequential(conv3x3(3, embed_dim // 8, 2), nn.GELU(),
                                      conv3x3(embed_dim // 8, embed_dim // 4, 2), nn.GELU(),
                                      conv3x3(embed_dim // 4, embed_dim // 2, 2), nn.GELU(),
                                      conv3x3(embed_dim // 2, embed_dim, 2))
        elif patch_size == 8:
            self.proj = nn.Sequential(conv3x3(3, embed_dim // 4, 2), nn.GELU(),
                                      conv3x3(embed_dim // 4, embed_dim // 2, 2), nn.GELU(),
                                      conv3x3(embed_dim // 2, embed_dim, 2))
        else:
            raise ValueError("patch size 8 or 16")

    def forward(self, x):
        x = self.proj(x)
        Hp, Wp = x.shape[2], x.shape[3]
        return x.flatten(2).transpose(1, 2), (Hp, Wp)


class PositionalEncodingFourier(nn.Module):
    def __init__(self, hidden_dim=32, dim=768, temperature=10000):
        super().__init__()
        self.token_projection = nn.Conv2d(hidden_dim * 2, dim, kernel_size=1)
        self.scale = 2 * math.pi
        self.temperature = temperature
        self.hidden_dim = hidden_dim

    def forward(self, B, H, W):
        dt = self.token_projection.weight.dtype  # float64 for the golden data, float32 in the benchmark
        dev = self.token_projection.weight.device  # the benchmark's CUDA peer (perf/peers/models_torch.py)
        not_mask = torch.ones(B, H, W, dtype=torch.bool, device=dev)
        y_embed = not_mask.cumsum(1, dtype=dt)
        x_embed = not_mask.cumsum(2, dtype=dt)
        eps = 1e-6
        y_embed = y_embed / (y_embed[:, -1:, :] + eps) * self.scale
        x_embed = x_embed / (x_embed[:, :, -1:] + eps) * self.scale
        dim_t = torch.arange(self.hidden_dim, dtype=dt, device=dev)
        dim_t = self.temperature ** (2 * torch.div(dim_t, 2, rounding_mode="floor") / self.hidden_dim)
        pos_x = x_embed[:, :, :, None] / dim_t
        pos_y = y_embed[:, :, :, None] / dim_t
        pos_x = torch.stack((pos_x[:, :, :, 0::2].sin(), pos_x[:, :, :, 1::2].cos()), dim=4).flatten(3)
        pos_y = torch.stack((pos_y[:, :, :, 0::2].sin(), pos_y[:, :, :, 1::2].cos()), dim=4).flatten(3)
        pos = torch.cat((pos_y, pos_x), dim=3).permute(0, 3, 1, 2)
        return self.token_projection(pos)


class AttentionTSSA(nn.Module):  # SPEC 1.4 / ToST App. E Alg. 1
    def __init__(self, dim, num_heads, qkv_bias=True):
        super().__init__()
        self.heads = num_heads
        self.qkv = nn.Linear(dim, dim, bias=qkv_bias)
        self.temp = nn.Parameter(torch.ones(num_heads, 1))
        self.to_out = nn.Sequential(nn.Linear(dim, dim), nn.Dropout(0.0))

    def forward(self, x):
        b, n, c = x.shape
        w = self.qkv(x).reshape(b, n, self.heads, -1).permute(0, 2, 1, 3)  # b h n p
        w_normed = F.normalize(w, dim=-2)
        Pi = torch.softmax((w_normed ** 2).sum(-1) * self.temp, dim=1)     # b h n
        dots = torch.matmul((Pi / (Pi.sum(dim=-1, keepdim=True) + 1e-8)).unsqueeze(-2), w ** 2)
        attn = 1.0 / (1 + dots)
        out = -torch.mul(w.mul(Pi.unsqueeze(-1)), attn)
        out = out.permute(0, 2, 1, 3).reshape(b, n, c)
        return self.to_out(out)


class Mlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


def LN(d):
    return nn.LayerNorm(d, eps=1e-6)


class TSSABlock(nn.Module):  # XCABlock of tost_cab.py without LPI
    def __init__(self, dim, heads, mlp_ratio, eta=1.0):
        super().__init__()
        self.norm1 = LN(dim)
        self.attn = AttentionTSSA(dim, heads, qkv_bias=True)
        self.norm2 = LN(dim)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))
        self.gamma1 = nn.Parameter(eta * torch.ones(dim))
        self.gamma2 = nn.Parameter(eta * torch.ones(dim))

    def forward(self, x):
        x = x + self.gamma1 * self.attn(self.norm1(x))
        x = x + self.gamma2 * self.mlp(self.norm2(x))
        return x


class ClassAttention(nn.Module):
    def __init__(self, dim, num_heads, qkv_bias=True):
        super().__init__()
        self.num_heads = num_heads
        self.scale = (dim // num_heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        qc = q[:, :, 0:1]
        attn_cls = ((qc * k).sum(dim=-1) * self.scale).softmax(dim=-1)
        cls_tkn = (attn_cls.unsqueeze(2) @ v).transpose(1, 2).reshape(B, 1, C)
        cls_tkn = self.proj(cls_tkn)
        return torch.cat([cls_tkn, x[:, 1:]], dim=1)


class ClassAttentionBlock(nn.Module):
    def __init__(self, dim, heads, mlp_ratio, eta=1.0, tokens_norm=True):
        super().__init__()
        self.norm1 = LN(dim)
        self.attn = ClassAttention(dim, heads, qkv_bias=True)
        self.norm2 = LN(dim)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))
        self.gamma1 = nn.Parameter(eta * torch.ones(dim))
        self.gamma2 = nn.Parameter(eta * torch.ones(dim))
        self.tokens_norm = tokens_norm

    def forward(self, x):
        x = x + self.gamma1 * self.attn(self.norm1(x))
        if self.tokens_norm:
            x = self.norm2(x)
        else:
            x = torch.cat([self.norm2(x[:, 0:1]), x[:, 1:]], dim=1)
        x_res = x
        cls_token = self.gamma2 * self.mlp(x[:, 0:1])
        x = torch.cat([cls_token, x[:, 1:]], dim=1)
        return x_res + x


class ToST(nn.Module):
    def __init__(self, patch_size, embed_dim, depth, num_heads, mlp_ratio, num_classes, cls_attn_layers=2):
        super().__init__()
        self.patch_embed = ConvPatchEmbed(patch_size, embed_dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embeder = PositionalEncodingFourier(dim=embed_dim)
        self.blocks = nn.ModuleList([TSSABlock(embed_dim, num_heads, mlp_ratio) for _ in range(depth)])
        self.cls_attn_blocks = nn.ModuleList([ClassAttentionBlock(embed_dim, num_heads, mlp_ratio)
                                              for _ in range(cls_attn_layers)])
        self.norm = LN(embed_dim)
        self.head = nn.Linear(embed_dim, num_classes)

    def forward(self, img, rec):
        B = img.shape[0]
        x, (Hp, Wp) = self.patch_embed(img)
        rec["patch"] = x
        pos = self.pos_embeder(B, Hp, Wp).reshape(B, -1, x.shape[1]).permute(0, 2, 1)
        rec["pos"] = pos[0]
        x = x + pos
        rec["embed"] = x
        for i, blk in enumerate(self.blocks):
            x = blk(x)
            rec[f"block{i}.out"] = x
        x = torch.cat((self.cls_token.expand(B, -1, -1), x), dim=1)
        for j, blk in enumerate(self.cls_attn_blocks):
            rec[f"cls{j}.in"] = x
            x = blk(x)
            rec[f"cls{j}.out"] = x
        feat = self.norm(x)[:, 0]
        rec["feature"] = feat
        logits = self.head(feat)
        rec["logits"] = logits
        return logits


# ---------------------------------------------------------------- randomization and output
def perturb(model, gen):
    """Moves every normalization / scale parameter away from its initial value."""
    with torch.no_grad():
        for name, mod in model.named_modules():
            if isinstance(mod, (nn.LayerNorm, nn.BatchNorm2d)):
                mod.weight.copy_(1 + 0.2 * torch.randn(mod.weight.shape, generator=gen))
                mod.bias.copy_(0.1 * torch.randn(mod.bias.shape, generator=gen))
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.copy_(0.3 * torch.randn(mod.running_mean.shape, generator=gen))
                mod.running_var.copy_(0.5 + torch.rand(mod.running_var.shape, generator=gen))
                mod.num_batches_tracked.fill_(100)
        for name, p in model.named_parameters():
            if name.endswith("gamma1") or name.endswith("gamma2"):
                p.copy_(0.5 + torch.rand(p.shape, generator=gen))
            elif name.endswith("attn.temp"):
                p.copy_(0.5 + 1.5 * torch.rand(p.shape, generator=gen))
            elif name == "cls_token":
                p.copy_(torch.randn(p.shape, generator=gen))


def f32_state(model):
    out = {}
    for k, v in model.state_dict().items():
        v = v.detach()
        out[k] = (v.to(torch.float32) if v.is_floating_point() else v).contiguous().clone()
    return out


def save(outdir, name, model, img, cfg):
    # weights rounded to float32 first; the reference then runs in float64 on exactly those values
    state = f32_state(model)
    model.load_state_dict({k: (v.to(DT) if v.is_floating_point() else v) for k, v in state.items()})
    model.eval()
    rec = {}
    with torch.no_grad():
        model(img.to(DT), rec)
    meta = {"config": json.dumps(cfg)}
    save_file(state, os.path.join(outdir, f"{name}.safetensors"), metadata=meta)
    gold = {"image": img.to(torch.float32).contiguous()}
    for k, v in rec.items():
        gold[k] = v.to(torch.float32).contiguous()
    save_file(gold, os.path.join(outdir, f"{name}_golden.safetensors"), metadata=meta)
    print(name, "logits", rec["logits"].numpy().round(4).tolist())


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    torch.manual_seed(4)
    gen = torch.Generator().manual_seed(4)

    cfg = dict(model="crate", image_size=32, patch_size=8, num_classes=10, dim=48, depth=2, heads=4,
               dim_head=12, channels=3, batch=2)
    m = CRATE(32, 8, 10, 48, 2, 4, 12).to(DT)
    perturb(m, gen)
    img = torch.randn(2, 3, 32, 32, generator=gen)
    save(outdir, "crate", m, img, cfg)

    cfg = dict(model="tost", image_size=64, patch_size=16, num_classes=10, dim=48, depth=2, heads=4,
               mlp_ratio=4, batch=2)
    m = ToST(16, 48, 2, 4, 4, 10).to(DT)
    perturb(m, gen)
    img = torch.randn(2, 3, 64, 64, generator=gen)
    save(outdir, "tost16", m, img, cfg)

    cfg = dict(model="tost", image_size=24, patch_size=8, num_classes=7, dim=32, depth=1, heads=2,
               mlp_ratio=2, batch=1)
    m = ToST(8, 32, 1, 2, 2, 7).to(DT)
    perturb(m, gen)
    img = torch.randn(1, 3, 24, 40, generator=gen)  # non-square: Hp = 3, Wp = 5
    cfg["image_width"] = 40
    save(outdir, "tost8", m, img, cfg)


if __name__ == "__main__":
    main()
