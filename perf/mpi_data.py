#!/usr/bin/env python3
"""Writes X.npy (m, d) float32 and y.npy (m,) int32: K Gaussian classes around random unit centres
(sigma 0.1), classes interleaved (row i has class i % K) so every contiguous shard holds all
classes. Plain Python (no NumPy).   usage: mpi_data.py OUTDIR m d K [seed]"""
import math, os, random, struct, sys

def npy(path, shape, fmt, data):
    descr = {'f': '<f4', 'i': '<i4'}[fmt]
    dims = '%d,' % shape[0] if len(shape) == 1 else ', '.join(str(s) for s in shape)
    hdr = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, dims)
    hdr += ' ' * (64 - (10 + len(hdr) + 1) % 64) + '\n'
    with open(path, 'wb') as f:
        f.write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(hdr)) + hdr.encode())
        f.write(struct.pack('<%d%s' % (len(data), fmt), *data))

out, m, d, K = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(int(sys.argv[5]) if len(sys.argv) > 5 else 1)
centres = []
for k in range(K):
    c = [rng.gauss(0, 1) for _ in range(d)]
    n = math.sqrt(sum(v * v for v in c))
    centres.append([v / n for v in c])
X, y = [], []
for i in range(m):
    k = i % K
    X.extend(c + 0.1 * rng.gauss(0, 1) for c in centres[k])
    y.append(k)
os.makedirs(out, exist_ok=True)
npy(os.path.join(out, 'X.npy'), [m, d], 'f', X)
npy(os.path.join(out, 'y.npy'), [m], 'i', y)
