"""Graph inputs as racefuzz feeds them: `InputSpec` and random inputs for one run.

Split from `models` (which re-exports all of it) to keep each module short. Like `models` it
runs in worker processes: the standard library and numpy only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from racefuzz.errors import RacefuzzError


@dataclass(frozen=True)
class InputSpec:
    """One graph input: symbolic or unknown dims are fixed to 1, so it can be fed directly.

    `symbols` names the symbolic dims (None for a fixed or unnamed one), so `random_inputs` can
    feed other sizes; () when the input has none. Left out of ==: a spec is what it feeds.
    """

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    symbols: tuple[str | None, ...] = field(default=(), compare=False)


def spec_of(name: str, dims: Sequence[int | str | None], dtype: np.dtype[Any]) -> InputSpec:
    """A spec from dims as ONNX and ORT give them: a positive int is fixed, a str is a symbol,
    anything else (None, 0, -1) unknown; the symbolic and unknown ones are fed as 1."""
    shape = tuple(d if isinstance(d, int) and d > 0 else 1 for d in dims)
    symbols = tuple(d if isinstance(d, str) and d else None for d in dims)
    return InputSpec(name, shape, dtype, symbols if any(symbols) else ())


_ORT_TYPES: Mapping[str, str] = {
    "float": "float32",
    "float16": "float16",
    "double": "float64",
    "bool": "bool",
    **{f"{s}int{n}": f"{s}int{n}" for s in ("", "u") for n in (8, 16, 32, 64)},
}


def input_spec_from_ort(name: str, shape: Sequence[int | str | None], type_name: str) -> InputSpec:
    """An `InputSpec` from what an ORT session reports (`NodeArg.name/.shape/.type`).

    For workers that already hold a session and want to skip importing onnx.
    """
    inner = type_name.removeprefix("tensor(").removesuffix(")")
    if inner not in _ORT_TYPES:
        raise RacefuzzError(f"input '{name}' has type {type_name}, which racefuzz cannot feed")
    return spec_of(name, shape, np.dtype(_ORT_TYPES[inner]))


def random_inputs(
    specs: Sequence[InputSpec], seed: int, dims: Mapping[str, int] | None = None
) -> dict[str, np.ndarray]:
    """Inputs for one run, the same for the same seed: floats standard normal, ints in 0..3.

    Small non-negative ints keep index-like inputs (Gather, embeddings) in range. `dims` sizes
    symbolic dims by name (`{"batch": 3, "seq": 7}`); the others stay as the specs say.
    """
    dims = dict(dims or {})
    known = {s for spec in specs for s in spec.symbols if s}
    for name, size in dims.items():
        if name not in known:
            have = ", ".join(sorted(known)) or "none"
            raise RacefuzzError(f"no input has a symbolic dim '{name}' (symbolic dims: {have})")
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise RacefuzzError(f"dim '{name}' must be a positive integer, not {size!r}")
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for spec in specs:
        kind = spec.dtype.kind
        shape = tuple(
            dims.get(sym, d) if sym else d
            for d, sym in zip(spec.shape, spec.symbols or (None,) * len(spec.shape), strict=True)
        )
        if kind == "f":
            out[spec.name] = rng.standard_normal(shape).astype(spec.dtype)
        elif kind in "iu":
            out[spec.name] = rng.integers(0, 4, shape).astype(spec.dtype)
        elif kind == "b":
            out[spec.name] = rng.integers(0, 2, shape).astype(np.bool_)
        else:
            raise RacefuzzError(
                f"input '{spec.name}' has dtype {spec.dtype}, which racefuzz cannot feed"
            )
    return out
