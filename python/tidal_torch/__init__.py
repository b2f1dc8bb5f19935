"""Tidal as a torch.distributed backend.

Importing this package registers the backend "tidal":

    import tidal_torch  # noqa: F401
    torch.distributed.init_process_group("tidal", ...)

CPU tensors only; docs/torch.md in the Tidal repository describes what each
collective does and which timeouts apply.
"""

from datetime import timedelta

import torch  # noqa: F401  (loads the libraries the extension links)
import torch.distributed as dist

from ._C import ProcessGroupTidal

__all__ = ["ProcessGroupTidal", "BACKEND"]

BACKEND = "tidal"


def _create_process_group(store, rank, world_size, timeout):
    if not isinstance(timeout, timedelta):
        raise TypeError(f"tidal: timeout must be a datetime.timedelta, not {type(timeout).__name__}")
    return ProcessGroupTidal(store, rank, world_size, timeout)


if BACKEND.upper() not in dist.Backend._plugins:
    dist.Backend.register_backend(BACKEND, _create_process_group)
