#!/usr/bin/env python3
"""Train a tiny character-level ToST-LM on the King James Bible with PyTorch on the CPU (issue 18).

The model is tests/golden/make_lm.py's reference `tost_lm` (nanoGPT shell, attention = ToST's
CausalSelfAttention_TSSA, no biases, tied lm_head): d 128, 4 layers, 4 heads (p 32), context 256.
Like wbcl (and issue 18) it has no gamma1/gamma2 layer scales, which ToST's own model_TSSA.py adds.

Text: the King James Version of the Bible (1611; its copyright has expired: public domain), from
Debian's packages bible-kjv-text (the compressed text, "provided for unrestricted use", see its
/usr/share/doc/bible-kjv-text/copyright) and bible-kjv (the `bible` program that prints it, GPL-2+;
only run, not shipped). To make the text file:

    mkdir /tmp/kjv && cd /tmp/kjv && apt-get download bible-kjv bible-kjv-text
    for f in *.deb; do dpkg-deb -x $f x; done
    x/usr/bin/bible -d x/usr/lib/bible.data "Gen1:1-Rev22:21" > kjv_raw.txt

then run (with a Python that has torch, numpy, safetensors, e.g. /tmp/torchenv/bin/python):

    python tools/train_char_lm.py --text /tmp/kjv/kjv_raw.txt [--minutes 4] [--out tests/data/lm]

Verse numbers are stripped and verse lines joined; chapter headings stay. The last 5% of the text is
held out for the validation loss. Training: AdamW (lr 2e-3, cosine to 1e-4, weight decay 0.1 on
matrices), batch 16 x 256, torch.set_num_threads(2), until --minutes of wall time. Outputs in --out:

  kjv_tost_lm.safetensors         float16 weights, nanoGPT keys (lm_head.weight included, tied to wte),
                                  metadata: config (as make_lm.py: model, vocab, block_size, dim, depth,
                                  heads, bias) and vocab (JSON list of the characters; id = index), text
                                  source, training figures
  kjv_tost_lm_golden.safetensors  prompt I64 (1, T0) and ids I64 (1, T0 + 200): the prompt followed by
                                  PyTorch's greedy continuation (float64 forward on the float16 weights,
                                  argmax of the last row of the full forward over the growing sequence),
                                  metadata prompt_text, text (the continuation decoded)

Committed result (tests/data/lm/, made by this script on the project machine, 2 threads shared with
other jobs): 73 characters, 1113 steps in 240 s, train loss 2.27 nats/char (EMA), validation 2.30;
weights 1.4 MB (float16, 0.80 M parameters). Greedy decoding from "And God said, " settles into
"the the the ..." (the smallest top-1/top-2 margin along the 200 steps is 0.62, so the argmax is
robust to float32 rounding: a good equality test, if not good prose). The loss is about bigram level:
causal TSSA passes information between tokens only through prefix-wide second-moment statistics
(S, Q, P), with no lookup of the previous characters, so a model this small trained this briefly
learns little beyond the current character. Sampling (temperature > 0) gives more varied text.
"""
import argparse
import json
import math
import os
import re
import sys
import time

import torch
from safetensors.torch import save_file

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden"))
from make_lm import LM  # noqa: E402  (the reference modules of the golden data)

PROMPT = "And God said, "


def load_text(path):
    """One line per verse (verse numbers dropped, wrapped lines joined) and the chapter headings."""
    out, after_blank = [], True
    for line in open(path, encoding="latin-1").read().split("\n"):
        if not line.strip():
            after_blank = True
            continue
        mv = re.match(r"^\s+\d+ (.*)$", line)
        if mv:
            out.append(mv.group(1).strip())
        elif after_blank or not out:
            out.append(line.strip())                     # heading, e.g. "Genesis 1"
        else:
            out[-1] += " " + line.strip()                # continuation of a wrapped verse
        after_blank = False
    return "\n".join(" ".join(l.split()) for l in out) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--text", required=True)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                                  "tests", "data", "lm"))
    ap.add_argument("--minutes", type=float, default=4.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--gen", type=int, default=200)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1611)

    text = load_text(a.text)
    vocab = sorted(set(text))
    stoi = {c: i for i, c in enumerate(vocab)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    n_val = len(data) // 20
    train, val = data[:-n_val], data[-n_val:]
    V, T, d, depth, K, B = len(vocab), 256, 128, 4, 4, 16
    print(f"text {len(text)} chars, vocab {V}", flush=True)

    m = LM("tost_lm", V, T, d, depth, K, False)
    with torch.no_grad():  # nanoGPT's init: N(0, 0.02), residual projections scaled by 1/sqrt(2 depth)
        for n, p in m.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * depth) if n.endswith("c_proj.weight") else 0.02
                p.normal_(0.0, std)
    decay = [p for n, p in m.named_parameters() if p.dim() == 2 and not n.endswith("denom_bias")]
    rest = [p for n, p in m.named_parameters() if not (p.dim() == 2 and not n.endswith("denom_bias"))]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                            lr=2e-3, betas=(0.9, 0.95))

    def batch(src, gen=None):
        ix = torch.randint(0, len(src) - T - 1, (B,), generator=gen)
        x = torch.stack([src[i:i + T] for i in ix])
        y = torch.stack([src[i + 1:i + T + 1] for i in ix])
        return x, y

    def val_loss():
        m.eval()
        g = torch.Generator().manual_seed(0)
        with torch.no_grad():
            ls = [torch.nn.functional.cross_entropy(m(x).reshape(-1, V), y.reshape(-1)).item()
                  for x, y in (batch(val, g) for _ in range(8))]
        m.train()
        return sum(ls) / len(ls)

    budget = a.minutes * 60.0
    t0 = time.time()
    step, loss_ema = 0, None
    while True:
        el = time.time() - t0
        if el > budget:
            break
        lr = 1e-4 + 0.5 * (2e-3 - 1e-4) * (1 + math.cos(math.pi * min(1.0, el / budget)))
        if step < 20:
            lr *= (step + 1) / 20
        for gp in opt.param_groups:
            gp["lr"] = lr
        x, y = batch(train)
        loss = torch.nn.functional.cross_entropy(m(x).reshape(-1, V), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        loss_ema = loss.item() if loss_ema is None else 0.95 * loss_ema + 0.05 * loss.item()
        if step % 25 == 0:
            print(f"step {step} {el:.0f}s lr {lr:.2e} loss {loss.item():.3f} (ema {loss_ema:.3f})", flush=True)
        step += 1
    train_s = time.time() - t0
    vl = val_loss()
    print(f"trained {step} steps in {train_s:.0f}s, train loss (ema) {loss_ema:.3f}, val loss {vl:.3f}")

    # store float16; the golden continuation is computed in float64 on exactly those values
    state = {k: v.detach().to(torch.float16).contiguous().clone() for k, v in m.state_dict().items()}
    state["transformer.wte.weight"] = state["lm_head.weight"].clone()
    m = m.to(torch.float64)
    m.load_state_dict({k: v.to(torch.float64) for k, v in state.items()})
    m.eval()
    cfg = dict(model="tost_lm", vocab=V, block_size=T, dim=d, depth=depth, heads=K, bias=False)
    meta = {"config": json.dumps(cfg), "vocab": json.dumps(vocab),
            "source": "King James Bible (public domain), Debian bible-kjv-text 4.38; tools/train_char_lm.py",
            "training": json.dumps(dict(steps=step, seconds=round(train_s), batch=B, context=T,
                                        train_loss_ema=round(loss_ema, 4), val_loss=round(vl, 4)))}
    os.makedirs(a.out, exist_ok=True)
    save_file(state, os.path.join(a.out, "kjv_tost_lm.safetensors"), metadata=meta)

    seq = torch.tensor([[stoi[c] for c in PROMPT]], dtype=torch.long)
    prompt = seq.clone()
    gap = math.inf
    with torch.no_grad():
        for _ in range(a.gen):
            last = m(seq[:, -T:])[:, -1, :]
            top2 = last.topk(2, dim=-1).values
            gap = min(gap, float(top2[0, 0] - top2[0, 1]))
            seq = torch.cat([seq, last.argmax(-1, keepdim=True)], dim=1)
    cont = "".join(vocab[i] for i in seq[0, prompt.shape[1]:].tolist())
    print(f"greedy ({a.gen} chars, smallest top-1/top-2 margin {gap:.2e}):\n{PROMPT}{cont}")
    save_file({"prompt": prompt.contiguous(), "ids": seq.contiguous()},
              os.path.join(a.out, "kjv_tost_lm_golden.safetensors"),
              metadata={"prompt_text": PROMPT, "text": cont, "min_margin": f"{gap:.3e}"})


if __name__ == "__main__":
    main()
