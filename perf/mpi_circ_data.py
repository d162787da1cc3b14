#!/usr/bin/env python3
"""Writes S.npy (m, Cin, T) float32 signals, y.npy (m,) int32 and W.npy (C, Cin, k) float32 (a random
lifting kernel) for the shift-invariant ReduNet over MPI: class k is cos(2 pi (k+1) t / T + phase) plus
noise (sigma 0.1) on every input channel, classes interleaved (sample i has class i % K) so every
contiguous shard holds all classes. Plain Python (no NumPy).
usage: mpi_circ_data.py OUTDIR m Cin T K C k [seed]"""
import math, os, random, struct, sys

def npy(path, shape, fmt, data):
    descr = {'f': '<f4', 'i': '<i4'}[fmt]
    dims = '%d,' % shape[0] if len(shape) == 1 else ', '.join(str(s) for s in shape)
    hdr = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, dims)
    hdr += ' ' * (64 - (10 + len(hdr) + 1) % 64) + '\n'
    with open(path, 'wb') as f:
        f.write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(hdr)) + hdr.encode())
        f.write(struct.pack('<%d%s' % (len(data), fmt), *data))

out = sys.argv[1]
m, Cin, T, K, C, k = (int(a) for a in sys.argv[2:8])
rng = random.Random(int(sys.argv[8]) if len(sys.argv) > 8 else 1)
X, y = [], []
for i in range(m):
    cls = i % K
    for c in range(Cin):
        ph = rng.uniform(0, 2 * math.pi)
        X.extend(math.cos(2 * math.pi * (cls + 1) * t / T + ph) + 0.1 * rng.gauss(0, 1) for t in range(T))
    y.append(cls)
W = [rng.uniform(-0.5, 0.5) for _ in range(C * Cin * k)]
os.makedirs(out, exist_ok=True)
npy(os.path.join(out, 'S.npy'), [m, Cin, T], 'f', X)
npy(os.path.join(out, 'y.npy'), [m], 'i', y)
npy(os.path.join(out, 'W.npy'), [C, Cin, k], 'f', W)
