"""Real Claude Code transcripts (the corpus) get a cost: their replies record tokens but no
price, so ``sessions show`` prices them from the registry (310 of their 311 records name
``claude-sonnet-4-20250514``, a dated id of ``claude-sonnet-4``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.corpus

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_imported_transcripts_show_a_non_zero_estimated_cost(
    fixtures_dir: Path, tmp_path: Path
) -> None:
    transcripts = sorted((fixtures_dir / "claude-code").glob("*-*-*-*-*.jsonl"))
    assert transcripts
    priced = 0
    for path in transcripts:
        proc = subprocess.run(
            [sys.executable, "-m", "harness.cli", "sessions", "show", str(path), "--no-page"],
            capture_output=True,
            text=True,
            encoding="utf-8",
            env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config")},
            cwd=REPO_ROOT,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        usage = [line for line in proc.stdout.splitlines() if line.startswith("usage (")]
        if not usage:
            continue  # a transcript whose replies carry no usage at all
        found = re.search(r"estimated from token counts: \$(\d+\.\d+)", usage[-1])
        assert found is not None, usage
        assert float(found.group(1)) > 0
        priced += 1
    assert priced > 0
