"""Probe: where an AOTInductor CUDA artifact's load dies on this machine (torch 2.11 on the H200 segfaults).

Builds a small conv stack as a bare .so (torch._inductor.aot_compile), then loads it through
torch._C._aoti.AOTIModelContainerRunnerCuda in child processes with a native-backtrace LD_PRELOAD
(benchmarks/probes/segv_bt.c, compiled here with the machine's gcc), plain and with variations that would
fix a C++ runtime mismatch (LD_PRELOAD of gcc's libstdc++, or loading it RTLD_GLOBAL before / after torch, or
rtvox's own `cxx_runtime_first`). Also records `ldd -r` (unresolved symbols) of the .so and which library the
.so's locale/collate symbols bind to (LD_DEBUG=bindings). Prints one JSON object.
    python benchmarks/probes/aoti_native_probe.py OUTDIR [cuda|cpu]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import torch

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from aoti_load_probe import Stack  # noqa: E402 - the same small conv stack as the load-path probe

RUN = (
    "import torch\n"
    "A = torch._C._aoti\n"
    "R = A.AOTIModelContainerRunnerCuda if DEVICE == 'cuda' else A.AOTIModelContainerRunnerCpu\n"
    "r = R(SO, 1, DEVICE) if DEVICE == 'cuda' else R(SO, 1)\n"
    "print('CONSTRUCTED', flush=True)\n"
    "io = torch.load(IO); y = r.run([io['x'].to(DEVICE)])[0]\n"
    "print('MAXDIFF', float((y.cpu() - io['ref']).abs().max()))\n"
)


def sh(cmd: list[str], env: dict[str, str] | None = None, timeout: int = 120) -> tuple[int, str]:
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    return p.returncode, p.stdout + p.stderr


def main(out: Path, device: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    report: dict[str, object] = {"torch": torch.__version__, "device": device}
    bt = out / "segv_bt.so"
    rc, text = sh(["gcc", "-shared", "-fPIC", "-O1", "-o", str(bt), str(HERE / "segv_bt.c")])
    report["segv_bt_build"] = rc if rc else "ok"
    torch.manual_seed(0)
    model = Stack().to(device).eval()
    x = torch.randn(1, 80, 200, device=device)
    ref = model(x)
    torch.save({"x": x.cpu(), "ref": ref.detach().cpu()}, out / "io.pt")
    ep = torch.export.export(model, (x,), dynamic_shapes={"x": {2: torch.export.Dim("t", min=16, max=4096)}})
    so = torch._inductor.aot_compile(ep.module(), (x,), options={"aot_inductor.output_path": str(out / "stack.so")})
    report["so"] = str(so)
    report["ldd_r"] = sh(["ldd", "-r", str(so)])[1].splitlines()[:40]
    report["gcc"] = sh(["gcc", "--version"])[1].splitlines()[:1]
    libstdcpp = sh(["gcc", "-print-file-name=libstdc++.so.6"])[1].strip()
    torch_lib = Path(torch.__file__).parent / "lib"
    report["libstdcpp"] = libstdcpp
    head = f"SO={str(so)!r}; DEVICE={device!r}; IO={str(out / 'io.pt')!r}\n"
    dl_first = f"import ctypes; ctypes.CDLL({libstdcpp!r}, mode=ctypes.RTLD_GLOBAL)\n"
    dl_after = f"import torch, ctypes; ctypes.CDLL({libstdcpp!r}, mode=ctypes.RTLD_GLOBAL)\n"
    # name -> (code, extra environment, extra LD_PRELOAD libraries after the backtrace handler)
    variants: dict[str, tuple[str, dict[str, str], list[str]]] = {
        "plain": (head + RUN, {}, []),
        "preload_gcc_libstdcpp": (head + RUN, {}, [libstdcpp]),
        "rtld_global_before_torch": (head + dl_first + RUN, {}, []),
        "rtld_global_after_torch": (head + dl_after + RUN, {}, []),
        "rtvox_cxxrt": (
            head + "from rtvox._cxxrt import cxx_runtime_first; print('CXXRT', cxx_runtime_first())\n" + RUN,
            {},
            [],
        ),
        "torch_lib_first": (
            head + RUN,
            {"LD_LIBRARY_PATH": f"{torch_lib}:{os.environ.get('LD_LIBRARY_PATH', '')}"},
            [],
        ),
    }
    # Which library the loader binds the locale/collate symbols to, from one LD_DEBUG=bindings run of "plain".
    _, text = sh([sys.executable, "-c", head + RUN], env={**os.environ, "LD_DEBUG": "bindings"}, timeout=180)
    collate = [ln for ln in text.splitlines() if "collate" in ln]
    report["bindings_collate"] = [ln for ln in collate if "libstdc" not in ln][:12]
    report["bindings_stack"] = [
        ln for ln in text.splitlines() if "stack.so" in ln and ("collate" in ln or "locale" in ln)
    ][:12]
    for name, (code, extra, preload) in variants.items():
        env = {**os.environ, **extra}
        env["PYTHONPATH"] = f"{HERE.parents[1] / 'src'}:{env.get('PYTHONPATH', '')}"
        env["LD_PRELOAD"] = ":".join([str(bt), *preload])
        rc, text = sh([sys.executable, "-c", code], env=env, timeout=180)
        lines = text.strip().splitlines()
        start = next((i for i, ln in enumerate(lines) if ln == "NATIVE_BACKTRACE"), None)
        report[name] = {
            "rc": rc,
            "tail": [ln for ln in lines if ln.startswith(("CXXRT", "CONSTRUCTED", "MAXDIFF"))] or lines[-3:],
            "backtrace": lines[start + 1 : start + 30] if start is not None else [],
        }
    print(json.dumps(report, indent=1))
    (out / "aoti_native_probe.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "cuda")
