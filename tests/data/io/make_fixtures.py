#!/usr/bin/env python3
"""Regenerates the .npy / .safetensors fixtures of tests/test_io.c and the fuzz seed corpora.

Dev-time only (needs numpy and safetensors: pip install numpy safetensors); the build and the
tests never run it. Usage: python3 tests/data/io/make_fixtures.py   (from the repository root)
"""
import os
import numpy as np
from safetensors.numpy import save_file

here = os.path.dirname(os.path.abspath(__file__))
corpus = os.path.join(here, "..", "..", "fuzz", "corpus")


def npy(name, arr, version=None, dirs=(here,)):
    for d in dirs:
        with open(os.path.join(d, name), "wb") as f:
            np.lib.format.write_array(f, arr, version=version, allow_pickle=False)


npy("f32_2x3.npy", (np.arange(6, dtype="<f4").reshape(2, 3) * 0.5 - 1.0))
npy("f64_scalar.npy", np.array(3.25, dtype="<f8"))
npy("i32_1d.npy", np.array([-1, 0, 7, 2**31 - 1, -(2**31)], dtype="<i4"))
npy("i64_4d.npy", (np.arange(24, dtype="<i8").reshape(1, 2, 3, 4) - 5) * 1000000007)
npy("f16_1d.npy", np.array([1.0, -2.0, 0.5, 65504.0, 2.0**-24, np.inf], dtype="<f2"))
npy("f32_v2.npy", np.array([[1.5, -2.5]], dtype="<f4"), version=(2, 0))
npy("f32_v3.npy", np.array([4.0, 5.0, 6.0], dtype="<f4"), version=(3, 0))
npy("f32_empty_0x3.npy", np.zeros((0, 3), dtype="<f4"))
npy("f32_fortran.npy", np.asfortranarray(np.arange(6, dtype="<f4").reshape(2, 3)))
npy("f32_bigendian.npy", np.arange(3, dtype=">f4"))
npy("bool_1d.npy", np.array([True, False]))

save_file({"module.qkv.weight": np.arange(6, dtype=np.float32).reshape(3, 2),
           "_orig_mod.module.proj.bias": np.array([0.25, -0.5], dtype=np.float64),
           "half": np.array([1.0, -2.0, 2.0**-24], dtype=np.float16),
           "ids": np.array([[1, -2], [3, 2**40]], dtype=np.int64),
           "counts": np.array(7, dtype=np.int32)},
          os.path.join(here, "weights.safetensors"),
          metadata={"format": "np", "note": "wbcl fixture"})
save_file({"w": np.ones(2, dtype=np.float32), "mask": np.array([True, False])},
          os.path.join(here, "with_bool.safetensors"))

# fuzz seeds: small valid files of each flavour
npy("seed_f32_2x3.npy", np.arange(6, dtype="<f4").reshape(2, 3), dirs=(os.path.join(corpus, "npy"),))
npy("seed_f64_scalar.npy", np.array(1.0), dirs=(os.path.join(corpus, "npy"),))
npy("seed_i64_v2.npy", np.arange(4, dtype="<i8"), version=(2, 0), dirs=(os.path.join(corpus, "npy"),))
npy("seed_f16_empty.npy", np.zeros((2, 0, 1), dtype="<f2"), dirs=(os.path.join(corpus, "npy"),))
npy("seed_i32_4d.npy", np.arange(16, dtype="<i4").reshape(2, 2, 2, 2), dirs=(os.path.join(corpus, "npy"),))
sc = os.path.join(corpus, "safetensors")
save_file({"module.a": np.arange(4, dtype=np.float32).reshape(2, 2),
           "b": np.array([1.0, 2.0], dtype=np.float16)}, os.path.join(sc, "seed_small.safetensors"),
          metadata={"k": "v"})
save_file({"x": np.array(3, dtype=np.int64), "y": np.zeros((0, 2), dtype=np.float64),
           "z": np.array([5, 6], dtype=np.int32)}, os.path.join(sc, "seed_ints.safetensors"))
# a BF16 tensor, written by hand (numpy has no bfloat16): 1.0, -2.0
hdr = b'{"bf":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}}'
hdr += b" " * (-len(hdr) % 8)
with open(os.path.join(sc, "seed_bf16.safetensors"), "wb") as f:
    f.write(len(hdr).to_bytes(8, "little") + hdr + bytes([0x80, 0x3F, 0x00, 0xC0]))
# overlapping data_offsets (refused, issue 20): a near miss of a valid file, by hand, so the fuzzer
# starts at the offsets-tiling check; the later tensor is listed first
hdr = (b'{"second":{"dtype":"F32","shape":[2],"data_offsets":[4,12]},'
       b'"first":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}')
hdr += b" " * (-len(hdr) % 8)
with open(os.path.join(sc, "seed_overlap.safetensors"), "wb") as f:
    f.write(len(hdr).to_bytes(8, "little") + hdr + bytes(range(12)))
