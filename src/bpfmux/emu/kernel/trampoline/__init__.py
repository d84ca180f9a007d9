"""The trampoline subsystem of the emulated kernel (``multi-attach.md`` §2).

- :mod:`.frame`: the frame layout programs see and per-call helper data;
- :mod:`.functions`: the kernel function table and the kernel's BPF test
  functions;
- :mod:`.images`: generated trampoline code;
- :mod:`.policy`: the ``clone``, ``filter`` and ``per-function`` policies.
"""

from .frame import Abi, CallInfo, ProgKind
from .functions import FunctionTable, KernelFunction, Param
from .images import Attachment, Costs, Image
from .policy import POLICIES, TrampolinePolicy, make_policy

__all__ = [
    "POLICIES",
    "Abi",
    "Attachment",
    "CallInfo",
    "Costs",
    "FunctionTable",
    "Image",
    "KernelFunction",
    "Param",
    "ProgKind",
    "TrampolinePolicy",
    "make_policy",
]
