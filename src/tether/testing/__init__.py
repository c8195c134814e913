"""Test doubles shipped with tether: the scripted model, ``FunctionModel``, the scripted server.

Use them in your own tests: they need no key and no network.
"""

from tether.providers.scripted import SCENARIOS, Reply, ScriptedModel, call, scripted_completion
from tether.testing.function_model import FunctionModel
from tether.testing.server import ScriptedServer

__all__ = [
    "SCENARIOS",
    "FunctionModel",
    "Reply",
    "ScriptedModel",
    "ScriptedServer",
    "call",
    "scripted_completion",
]
