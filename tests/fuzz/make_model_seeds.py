#!/usr/bin/env python3
"""Seed corpus for fuzz_models.c: tiny CRATE and ToST weight files (the configurations the fuzz
target loads with), from the reference modules of tests/golden/make_models.py.

    /tmp/torchenv/bin/python tests/fuzz/make_model_seeds.py    (needs torch, safetensors)
"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "golden"))
import make_models as mm  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

out = os.path.join(HERE, "corpus", "models")
os.makedirs(out, exist_ok=True)
torch.manual_seed(7)
gen = torch.Generator().manual_seed(7)
crate = mm.CRATE(image_size=4, patch_size=2, num_classes=3, dim=8, depth=1, heads=2, dim_head=4, channels=1)
mm.perturb(crate, gen)
save_file(mm.f32_state(crate), os.path.join(out, "seed_crate.safetensors"))
tost = mm.ToST(patch_size=8, embed_dim=8, depth=1, num_heads=2, mlp_ratio=2, num_classes=3, cls_attn_layers=1)
mm.perturb(tost, gen)
save_file(mm.f32_state(tost), os.path.join(out, "seed_tost.safetensors"))
# the same ToST without the optional qkv bias of the class-attention block and with F16 weights
st = {k: (v.half() if v.is_floating_point() else v) for k, v in mm.f32_state(tost).items()
      if k != "cls_attn_blocks.0.attn.qkv.bias"}
save_file(st, os.path.join(out, "seed_tost_f16.safetensors"))
for f in sorted(os.listdir(out)):
    print(f, os.path.getsize(os.path.join(out, f)))
