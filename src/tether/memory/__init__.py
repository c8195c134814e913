"""Cross-session memory: a user profile and fact notes, kept as plain files, scanned on every
write, shown to the model at the start of each session, changed with the ``memory`` tool.

``Agent(model=..., extensions=[Memory.open()])`` is all an agent needs.
"""

from typing import TYPE_CHECKING

from tether._lazy import lazy_exports
from tether.memory.core import DEFAULT_NOTES_LIMIT, DEFAULT_PROFILE_LIMIT, Memory, MemoryScope
from tether.memory.store import STORES, Change, MemoryRefused, StoreUsage

if TYPE_CHECKING:
    from tether.memory.scan import Finding, ModelScanner, PatternScanner, Scanner, default_scanner, scan_context_text

__all__ = [
    "DEFAULT_NOTES_LIMIT",
    "DEFAULT_PROFILE_LIMIT",
    "STORES",
    "Change",
    "Finding",
    "Memory",
    "MemoryRefused",
    "MemoryScope",
    "ModelScanner",
    "PatternScanner",
    "Scanner",
    "StoreUsage",
    "default_scanner",
    "scan_context_text",
]

# The scanner is imported on first use (its patterns are many): a run that writes no memory and has
# none to show never loads it.
__getattr__, __dir__ = lazy_exports(
    __name__,
    dict.fromkeys(
        ("Finding", "ModelScanner", "PatternScanner", "Scanner", "default_scanner", "scan_context_text"),
        "tether.memory.scan",
    ),
    globals(),
)
