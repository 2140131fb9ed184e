"""Without a corpus, the corpus tests are skipped (not failed), all with one one-line reason."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from corpus import CORPUS_ENV, CORPUS_MISSING, corpus_dir

REPO_ROOT = Path(__file__).resolve().parents[1]
CORPUS = ["tests/corpus"]


def _run_corpus_tests(corpus: Path) -> subprocess.CompletedProcess[str]:
    # The inner run checks the skip path only: CI's required groups are the outer run's business.
    env = {k: v for k, v in os.environ.items() if k != "HARNESS_REQUIRE_GROUPS"}
    env[CORPUS_ENV] = str(corpus)
    return subprocess.run(
        # -n 0: the inner run is small; xdist workers would cost more than its tests.
        [sys.executable, "-m", "pytest", "-q", "-rs", "-n", "0", "-p", "no:cacheprovider", *CORPUS],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO_ROOT,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize("kind", ["nonexistent", "empty"])
def test_corpus_tests_skip_with_one_reason_without_a_corpus(tmp_path: Path, kind: str) -> None:
    corpus = tmp_path / "no-such-dir" if kind == "nonexistent" else tmp_path
    proc = _run_corpus_tests(corpus)
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    reasons = {line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("SKIPPED")}
    assert reasons == {CORPUS_MISSING}
    assert CORPUS_MISSING.count("\n") == 0
    summary = out.strip().splitlines()[-1]
    assert re.fullmatch(r"\d+ skipped in [\d.]+s( \(.*\))?", summary), summary
    # The one line the terminal summary adds, with how many tests it covers.
    assert f"{CORPUS_MISSING} (" in out


def test_an_explicit_corpus_setting_wins_over_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CORPUS_ENV, str(tmp_path / "missing"))
    assert corpus_dir() is None
    (tmp_path / "pi").mkdir()
    monkeypatch.setenv(CORPUS_ENV, str(tmp_path))
    assert corpus_dir() is None  # anthropic/ missing: not a corpus
    (tmp_path / "anthropic").mkdir()
    assert corpus_dir() == tmp_path
