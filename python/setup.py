"""pip install ./python: builds tidal_torch against a libtidal that is already
built or installed.

Where libtidal is, in this order: $TIDAL_HOME (a prefix with include/tidal/tidal.h
and lib/libtidal.so, or a build tree), this repository's build/ directory, or
pkg-config tidal (after cmake --install). The extension records that library
directory as its run path.
"""

import os
import shlex
import subprocess

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def find_tidal():
    candidates = []
    if os.environ.get("TIDAL_HOME"):
        home = os.environ["TIDAL_HOME"]
        candidates.append((os.path.join(home, "include"), os.path.join(home, "lib")))
        candidates.append((os.path.join(REPO, "include"), home))  # a build tree
    candidates.append((os.path.join(REPO, "include"), os.path.join(REPO, "build")))
    for inc, lib in candidates:
        if os.path.exists(os.path.join(inc, "tidal", "tidal.h")) and \
                os.path.exists(os.path.join(lib, "libtidal.so")):
            return [inc], [lib]
    try:
        cflags = subprocess.check_output(["pkg-config", "--cflags-only-I", "tidal"], text=True)
        libs = subprocess.check_output(["pkg-config", "--libs-only-L", "tidal"], text=True)
    except (OSError, subprocess.CalledProcessError):
        raise SystemExit("tidal_torch: libtidal not found: set TIDAL_HOME to its prefix or build "
                         "tree, build this repository into build/, or cmake --install it")
    return ([f[2:] for f in shlex.split(cflags)], [f[2:] for f in shlex.split(libs)])


include_dirs, library_dirs = find_tidal()
sources = ["backend.cc", "p2p_channels.cc", "tensors.cc", "work.cc", "process_group_v1.cc"]

setup(
    name="tidal_torch",
    version="0.2.0",
    description="Tidal as a torch.distributed backend",
    packages=["tidal_torch"],
    ext_modules=[CppExtension(
        "tidal_torch._C", [os.path.join("csrc", s) for s in sources],
        include_dirs=include_dirs, library_dirs=library_dirs, libraries=["tidal"],
        runtime_library_dirs=library_dirs, extra_compile_args=["-std=c++17"])],
    cmdclass={"build_ext": BuildExtension},
)
