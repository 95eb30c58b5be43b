"""The CUDA out-of-memory message torch raises, as vLLM logs and (kept alive) answers it."""

OOM_LINE = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
            "total capacity of 79.25 GiB of which 1.06 GiB is free. Process has 78.19 GiB memory "
            "in use.")
