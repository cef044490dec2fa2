"""The benchmark suite behind ``kinema bench`` (timing helpers, NumPy baselines, peers, plots).

Nothing here is imported by the rest of kinema; :mod:`kinema.bench._plot` is the only module that
imports matplotlib (``pip install "kinema[bench]"``).
"""

from __future__ import annotations

__all__: list[str] = []
