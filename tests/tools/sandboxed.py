"""What the sandbox tests share: the mark for a test that needs the OS sandbox built here."""

from __future__ import annotations

import pytest

from tether.tools.sandbox import sandbox_status

# .ci/run installs bubblewrap; a machine without it (or without user namespaces) cannot build the sandbox.
_STATUS = sandbox_status()
needs_sandbox = pytest.mark.skipif(not _STATUS.available, reason=f"no sandbox here: {_STATUS.why_not}")
