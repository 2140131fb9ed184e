"""The storage benchmark runs end to end (``--quick``): every row of its table is printed.

Speed is never asserted here; only that the command works and reports each operation.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bench" / "bench_storage.py"


def _row_names() -> list[str]:
    spec = importlib.util.spec_from_file_location("bench_storage_smoke", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    names: list[str] = module.row_names(quick=True)
    return names


def test_bench_storage_quick_prints_every_row(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    done = subprocess.run(
        [
            *(sys.executable, str(SCRIPT), "--quick", "--runs", "1"),
            *("--data", str(tmp_path / "data"), "--json", str(out)),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    names = _row_names()
    assert len(names) == 14
    for name in names:
        assert f"| {name} |" in done.stdout, f"row {name!r} missing:\n{done.stdout}"
    assert "pi: not measured (" in done.stdout
    assert "Growth:" in done.stdout
    for size in ("1,000", "2,000", "5,000"):
        assert f"| {size} |" in done.stdout
    report = json.loads(out.read_text())
    assert [row["name"] for row in report["rows"]] == names
    assert not report["errors"]
