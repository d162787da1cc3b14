"""Shared fixtures: one context for the session (PoCL compiles each kernel program once), the
repository's test data, a tiny safetensors reader (the format: 8-byte little-endian header length,
a JSON header of dtype/shape/offsets, raw little-endian data) so that no extra package is needed."""
import json
import os
import struct

import numpy as np
import pytest

import wbcl

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="session")
def ctx():
    c = wbcl.Context()
    yield c
    c.close()


@pytest.fixture
def rng():
    return np.random.default_rng(19)


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    dt = {"F32": "<f4", "F64": "<f8", "F16": "<f2", "I64": "<i8", "I32": "<i4"}
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        out[k] = np.frombuffer(data[a:b], dtype=dt[v["dtype"]]).reshape(v["shape"])
    return out


def repo_path(*parts):
    return os.path.join(REPO, *parts)
