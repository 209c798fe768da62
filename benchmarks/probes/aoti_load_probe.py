"""Probe: which AOTInductor load path works on this machine's torch (the H200 has 2.11, CI 2.13).

Builds one small conv stack (a vocoder-like hot path) as (a) a .pt2 package and (b) a bare .so, then tries each
load path in its own subprocess so a segfault is recorded instead of killing the probe. Prints one JSON line.
    python benchmarks/probes/aoti_load_probe.py OUTDIR [cuda|cpu]
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch

LOADERS = {
    "aoti_load_package": "m = torch._inductor.aoti_load_package(PKG)\ny = m(x)",
    "package_loader_cpp": (
        "loader = torch._C._aoti.AOTIModelPackageLoader(PKG, 'model', False, 1, DEV_INDEX)\n"
        "y = loader.boxed_run([x])[0] if hasattr(loader, 'boxed_run') else loader.run([x])[0]"
    ),
    "aot_load_so": "m = torch._export.aot_load(SO, DEVICE)\ny = m(x)",
    "container_runner": (
        "R = torch._C._aoti.AOTIModelContainerRunnerCuda if DEVICE == 'cuda' else "
        "torch._C._aoti.AOTIModelContainerRunnerCpu\n"
        "r = R(SO, 1, DEVICE) if DEVICE == 'cuda' else R(SO, 1)\ny = r.run([x])[0]"
    ),
}


class Stack(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Conv1d(80, 128, 7, padding=3)
        self.b = torch.nn.Conv1d(128, 128, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.nn.functional.leaky_relu(self.a(x), 0.1))


def main(out: Path, device: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = Stack().to(device).eval()
    x = torch.randn(1, 80, 200, device=device)
    ref = model(x)
    torch.save({"x": x.cpu(), "ref": ref.detach().cpu()}, out / "io.pt")
    t_dim = torch.export.Dim("t", min=16, max=4096)
    ep = torch.export.export(model, (x,), dynamic_shapes={"x": {2: t_dim}})
    report: dict[str, object] = {"torch": torch.__version__, "device": device}
    t0 = time.time()
    pkg = torch._inductor.aoti_compile_and_package(ep, package_path=str(out / "stack.pt2"))
    report["package_build_s"] = round(time.time() - t0, 1)
    t0 = time.time()
    try:
        so = torch._inductor.aot_compile(ep.module(), (x,), options={"aot_inductor.output_path": str(out / "stack.so")})
        report["so_build_s"] = round(time.time() - t0, 1)
    except Exception as exc:  # record, do not stop: the other loaders still tell us something
        so = ""
        report["so_build_error"] = repr(exc)[:300]
    for name, body in LOADERS.items():
        code = (
            "import torch, faulthandler; faulthandler.enable()\n"
            f"PKG={str(pkg)!r}; SO={str(so)!r}; DEVICE={device!r}; DEV_INDEX={0 if device == 'cuda' else -1}\n"
            f"io=torch.load({str(out / 'io.pt')!r}); x=io['x'].to(DEVICE)\n"
            f"{body}\n"
            "print('MAXDIFF', float((y.cpu()-io['ref']).abs().max()))\n"
        )
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240)
        tail = (proc.stdout + proc.stderr).strip().splitlines()[-6:]
        report[name] = {"rc": proc.returncode, "tail": tail}
        if proc.returncode < 0 and shutil.which("gdb"):
            # A signal: take a native backtrace of where the loader dies.
            gdb = ["gdb", "-batch", "-ex", "run", "-ex", "bt 25", "--args", sys.executable, "-c", code]
            dbg = subprocess.run(gdb, capture_output=True, text=True, timeout=240)
            report[name]["gdb_bt"] = [ln for ln in dbg.stdout.splitlines() if ln.startswith("#")][:25]
    print(json.dumps(report))
    (out / "aoti_probe.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else ("cuda" if torch.cuda.is_available() else "cpu"))
    os._exit(0)
