"""rtvox._cxxrt: libstdc++ loaded into the global symbol scope before AOTInductor artifacts are loaded."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rtvox import _cxxrt


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")
def test_loads_libstdcpp_globally_without_importing_torch() -> None:
    code = (
        "import sys, ctypes\n"
        "from rtvox._cxxrt import cxx_runtime_first\n"
        "name = cxx_runtime_first()\n"
        "assert 'torch' not in sys.modules, 'must run before torch is imported'\n"
        "assert name and 'stdc++' in name, name\n"
        # RTLD_GLOBAL: a symbol of libstdc++ is now visible through the process's global scope
        "ctypes.CDLL(None)['_ZNSt6locale7classicEv']\n"
        "print(name)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "stdc++" in out.stdout


def test_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_cxxrt.DISABLE_ENV, "1")
    _cxxrt.cxx_runtime_first.cache_clear()
    try:
        assert _cxxrt.cxx_runtime_first() is None
    finally:
        _cxxrt.cxx_runtime_first.cache_clear()
