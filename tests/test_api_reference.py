"""docs/api.md is what tools/api_reference.py writes from the code's docstrings: a docstring or a
signature that changed without the page being written again fails here (run
``python tools/api_reference.py``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_api_reference_is_current() -> None:
    spec = importlib.util.spec_from_file_location("api_reference", ROOT / "tools" / "api_reference.py")
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    written = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    assert written == generator.render(), "docs/api.md is stale: run python tools/api_reference.py"
    assert "## `tether`" in written and "### `run_sync(" in written and "### `Agent(" in written
