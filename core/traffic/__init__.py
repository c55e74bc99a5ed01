"""Traffic control: limits shared by every worker, shared back-off, circuit breakers (docs/notes/traffic.md).

The feature's one seam: the worker, the composition root and the readings import what is listed in
``__all__`` from here. Inside, layered one way (pyproject's contract): ``gate`` (around each provider call:
admit, settle, hold; which failures count and which are excused) above ``metrics`` (its counter of holds) and
``store`` (the Redis state and its Lua: ``admit.lua``, ``settle.lua``, ``circuits.lua``), above ``settings``
(the settings mixin and the :class:`Limits` one provider gets).
"""

from calsync.core.traffic.gate import TrafficGate, export_deferral_zeros
from calsync.core.traffic.settings import Limits, provider_limits
from calsync.core.traffic.store import CIRCUIT_STATE_VALUES, CircuitReading, CircuitState, TrafficStore

__all__ = [
    "CIRCUIT_STATE_VALUES",
    "CircuitReading",
    "CircuitState",
    "Limits",
    "TrafficGate",
    "TrafficStore",
    "export_deferral_zeros",
    "provider_limits",
]
