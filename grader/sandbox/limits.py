"""Resource limits of one sandboxed submission."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Limits:
    wall_s: float = 60.0  # whole submission; the engine also uses per-request socket timeouts
    cpu_s: int = 120
    memory_bytes: int = 2 << 30
    max_pids: int = 64
    file_size_bytes: int = 64 << 20
    open_files: int = 256
    scratch_bytes: int = 256 << 20  # size of the private tmpfs scratch folder

    def as_dict(self) -> dict[str, float]:
        return asdict(self)
