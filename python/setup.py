"""Records where this checkout builds libwbcl (../build) in wbcl/_build_dir.py at install time, so that
an installed package finds the libraries of the tree it was installed from. The rest of the metadata is
in pyproject.toml; no compiler is involved."""
import os

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPy(build_py):
    def run(self):
        super().run()
        here = os.path.dirname(os.path.abspath(__file__))
        build = os.environ.get("WBCL_BUILD_DIR") or os.path.join(os.path.dirname(here), "build")
        target = os.path.join(self.build_lib, "wbcl", "_build_dir.py")
        with open(target, "w") as f:
            f.write("# written by python/setup.py at install time\nBUILD_DIR = %r\n" % os.path.abspath(build))


setup(packages=["wbcl"], cmdclass={"build_py": BuildPy})
