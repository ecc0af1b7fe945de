"""What the exporter reports when it cannot do its work.

Every error names where in the model it happened (an ONNX node name or a PyTorch module path, and a
source line where the front-end knows it), so a user can find it without reading the exporter.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional


class ExportError(Exception):
    """A model or an option the exporter cannot turn into a suite."""


@dataclass(frozen=True)
class Unsupported:
    """One framework operator with no catalog lowering."""

    op: str  # the ONNX op type or ATen overload, as the framework names it
    where: str  # ONNX node name or module path
    module: str = ""  # the module path (stage cuts)
    stage: Optional[str] = None
    source: Optional[str] = None  # file:line of the model's code, where known
    reason: str = "no lowering to a catalog operator"

    def line(self) -> str:
        parts = [f"{self.op} at {self.where or '(model root)'}"]
        if self.stage:
            parts.append(f"stage {self.stage}")
        if self.source:
            parts.append(self.source)
        return " | ".join(parts) + f": {self.reason}"


class UnsupportedOperators(ExportError):
    """Every operator without a lowering, listed at once; nothing was written."""

    def __init__(self, items: List[Unsupported]):
        self.items = items
        counts: dict = {}
        for u in items:
            counts[u.op] = counts.get(u.op, 0) + 1
        kinds = ", ".join(f"{op} ×{n}" for op, n in sorted(counts.items()))
        lines = "\n".join("  " + u.line() for u in items)
        super().__init__(
            f"{len(items)} operator use(s) of {len(counts)} kind(s) have no lowering to the VIPS catalog "
            f"({kinds}); nothing was written:\n{lines}\n"
            "Each needs a catalog operator (docs/operators.md; docs/authoring.md, "
            "'When an operator is missing')."
        )


class ValidationFailed(ExportError):
    """The model failed its own suite: a bug in the exporter or the catalog."""
