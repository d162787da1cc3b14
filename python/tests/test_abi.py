"""The package's ctypes mirrors of the C structs (wbcl/_lib.py) against the C headers: every field at the
C offset and every struct at the C size. A mirror that lags its struct (a field added in C) makes the
library write past the Python buffer (the config presets) or read garbage after it: heap corruption
that shows only later, e.g. as a crash in the interpreter's exit. perf/peers/models_torch.py had such a
mirror of wbcl_tost_config until 2026-11-29 (perf/RESULTS.md, fifteenth session).

The offsets come from a small C program compiled here against include/ with the system's C compiler
(the one that builds wbcl); without a compiler the test is skipped, saying so."""
import ctypes
import importlib.util
import os
import shutil
import subprocess

import pytest

from wbcl import _lib

from conftest import REPO


def _peer_script():
    # perf/peers/models_torch.py keeps mirrors of its own (it loads any libwbcl.so by path); importing it
    # runs no benchmark (torch is imported inside main())
    spec = importlib.util.spec_from_file_location("models_torch", os.path.join(REPO, "perf", "peers",
                                                                               "models_torch.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_peer = _peer_script()

# (mirror, C type, header, Python field names that differ from the C names, whole struct mirrored)
MIRRORS = [
    (_lib.DeviceInfo, "wbcl_device_info", "wbcl/device.h", {}, True),
    (_lib.Array, "wbcl_array", "wbcl/io.h", {}, True),
    (_lib.RedunetParams, "wbcl_redunet_params", "wbcl/redunet.h", {"lambda_": "lambda"}, True),
    (_lib.LMInfo, "wbcl_lm_info", "wbcl/lm.h", {}, True),
    (_lib.LMSampling, "wbcl_lm_sampling", "wbcl/lm.h", {}, True),
    (_lib.CrateConfig, "wbcl_crate_config", "wbcl/models.h", {}, True),
    (_lib.ToSTConfig, "wbcl_tost_config", "wbcl/models.h", {}, True),
    (_lib.CirculantParams, "wbcl_circulant_params", "wbcl/circulant.h", {"lambda_": "lambda"}, True),
    (_lib.RunModule, "wbcl_run_module", "run/registry.h", {}, False),  # its leading fields only
    (_peer.CrateConfig, "wbcl_crate_config", "wbcl/models.h", {}, True),
    (_peer.TostConfig, "wbcl_tost_config", "wbcl/models.h", {}, True),
]


def c_layout(tmp_path):
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        pytest.skip("no C compiler (cc, gcc, clang or $CC) to read the C structs' layout with")
    lines = ["#include <stddef.h>", "#include <stdio.h>"]
    lines += ["#include \"%s\"" % h for h in sorted({m[2] for m in MIRRORS})]
    lines.append("int main(void) {")
    for cls, cname, _, rename, _ in MIRRORS:
        lines.append('    printf("%s sizeof %%zu\\n", sizeof(%s));' % (cname, cname))
        for f in cls._fields_:
            cf = rename.get(f[0], f[0])
            lines.append('    printf("%s %s %%zu\\n", offsetof(%s, %s));' % (cname, f[0], cname, cf))
    lines += ["    return 0;", "}"]
    src, exe = tmp_path / "layout.c", tmp_path / "layout"
    src.write_text("\n".join(lines) + "\n")
    inc = ["-I", os.path.join(REPO, "include"), "-I", os.path.join(REPO, "tools")]
    r = subprocess.run([cc, "-std=c11", *inc, str(src), "-o", str(exe)], capture_output=True, text=True)
    assert r.returncode == 0, "the layout program does not compile (a mirrored field missing in C?):\n" + r.stderr
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    return {(a, b): int(c) for a, b, c in (line.split() for line in out.splitlines())}


def test_struct_mirrors_match_the_headers(tmp_path):
    layout = c_layout(tmp_path)
    for cls, cname, _, _, whole in MIRRORS:
        for f in cls._fields_:
            assert getattr(cls, f[0]).offset == layout[(cname, f[0])], \
                "%s.%s: offset %d in the Python mirror, %d in C" % (cname, f[0], getattr(cls, f[0]).offset,
                                                                      layout[(cname, f[0])])
        if whole:
            assert ctypes.sizeof(cls) == layout[(cname, "sizeof")], \
                "%s: %d bytes in the Python mirror, %d in C (a field missing?)" % (
                    cname, ctypes.sizeof(cls), layout[(cname, "sizeof")])
        else:
            assert ctypes.sizeof(cls) <= layout[(cname, "sizeof")], cname
