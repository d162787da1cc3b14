#!/usr/bin/env python3
"""Text <-> token ids for the character-level language models (issue 18), with the vocabulary stored
in the weights' safetensors metadata ("vocab": a JSON list of characters; id = index), as written by
tools/train_char_lm.py. Needs only numpy (the metadata is read from the safetensors header directly).

    python tools/lm_text.py encode --weights tests/data/lm/kjv_tost_lm.safetensors \
        --text "And God said, " --output prompt.npy          (int64, shape (T))
    python tools/lm_text.py decode --weights tests/data/lm/kjv_tost_lm.safetensors --input ids.npy
        (prints the text; ids (T) or (B, T): one line of text per sequence)

A character outside the vocabulary is an error naming it; so is an id outside [0, V).
"""
import argparse
import json
import struct
import sys

import numpy as np


def read_vocab(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    meta = header.get("__metadata__") or {}
    if "vocab" not in meta:
        sys.exit(f"lm_text: {path} has no 'vocab' in its metadata")
    return json.loads(meta["vocab"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["encode", "decode"])
    ap.add_argument("--weights", required=True)
    ap.add_argument("--text", help="text to encode (default: stdin)")
    ap.add_argument("--output", help="encode: the .npy to write")
    ap.add_argument("--input", help="decode: the .npy of ids")
    a = ap.parse_args()
    vocab = read_vocab(a.weights)
    if a.mode == "encode":
        text = a.text if a.text is not None else sys.stdin.read()
        stoi = {c: i for i, c in enumerate(vocab)}
        bad = sorted({c for c in text if c not in stoi})
        if bad:
            sys.exit(f"lm_text: characters not in the vocabulary of {a.weights}: {bad!r}")
        if not a.output:
            sys.exit("lm_text: encode needs --output FILE.npy")
        np.save(a.output, np.array([stoi[c] for c in text], dtype=np.int64))
    else:
        if not a.input:
            sys.exit("lm_text: decode needs --input FILE.npy")
        ids = np.load(a.input)
        if not np.issubdtype(ids.dtype, np.integer) or ids.ndim not in (1, 2):
            sys.exit(f"lm_text: {a.input}: expected integer ids (T) or (B, T), got {ids.dtype} {ids.shape}")
        for row in np.atleast_2d(ids):
            bad = [int(i) for i in row if not 0 <= i < len(vocab)]
            if bad:
                sys.exit(f"lm_text: id {bad[0]} outside [0, {len(vocab)})")
            print("".join(vocab[int(i)] for i in row))


if __name__ == "__main__":
    main()
