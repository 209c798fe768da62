"""Put the system C++ runtime first in the process's global symbol scope (Linux), for AOTInductor artifacts.

An AOTInductor .so (torch 2.11 on the H200) instantiates std::regex / std::locale templates itself and lists no
libstdc++ among its needed libraries, so its references to the runtime's facet ids resolve to whatever library
exports them first in the global scope. When that is not the real libstdc++, `std::use_facet` hands back the
wrong facet and the .so segfaults in its constructor (`parse_device_str`, native backtrace in
benchmarks/results/gpu/aoti_native_probe.json); `LD_PRELOAD=<gcc's libstdc++.so.6>` made the same .so load and
match eager. Loading libstdc++ with RTLD_GLOBAL before torch has the same effect in-process. This module imports
nothing heavy so it can run before torch.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import subprocess
import sys
from functools import cache

DISABLE_ENV = "RTVOX_NO_CXXRT_FIRST"


def _candidates() -> list[str]:
    names: list[str] = []
    gxx = shutil.which("g++") or shutil.which("gcc")
    if gxx:
        try:
            out = subprocess.run(
                [gxx, "-print-file-name=libstdc++.so.6"], capture_output=True, text=True, timeout=10, check=False
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            out = ""
        if os.path.isabs(out) and os.path.isfile(out):
            names.append(out)  # the runtime the AOTI .so was compiled against
    found = ctypes.util.find_library("stdc++")
    if found:
        names.append(found)
    return [*names, "libstdc++.so.6"]


@cache
def cxx_runtime_first() -> str | None:
    """dlopen libstdc++ with RTLD_GLOBAL (once per process); returns what was loaded, or None when skipped
    (not Linux, RTVOX_NO_CXXRT_FIRST=1, or no libstdc++ found). Call it before torch is imported."""
    if not sys.platform.startswith("linux") or os.environ.get(DISABLE_ENV) == "1":
        return None
    for name in _candidates():
        try:
            ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
        except OSError:
            continue
        return name
    return None
