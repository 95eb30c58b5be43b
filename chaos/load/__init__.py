"""Load: workloads, Locust users (users.py, context.py, locustfile.py: imported only inside Locust processes),
the headless/distributed runner and results computed from raw request records.

Importing this package never imports Locust (which monkey-patches the process with gevent).
"""
from chaos.load.config import LoadConfig
from chaos.load.records import ERROR_CLASSES, RequestRecord, iter_records, read_records, write_records
from chaos.load.runner import LoadHandle, LoadResult, read_dir, run_load, start_load
from chaos.load.stats import ClassStats, LoadStats, meets_slos, percentile, summarize
from chaos.load.workloads import (
                                  DEFAULT_CLASSES,
                                  DEFAULT_MIX,
                                  MixWorkload,
                                  Prompt,
                                  count_tokens,
                                  long_context_burst,
                                  make_workload,
                                  shared_prefix_set,
                                  special_corpus,
)

__all__ = [
    "ClassStats", "DEFAULT_CLASSES", "DEFAULT_MIX", "ERROR_CLASSES", "LoadConfig", "LoadHandle", "LoadResult",
    "LoadStats", "MixWorkload", "Prompt", "RequestRecord", "count_tokens", "iter_records", "long_context_burst",
    "make_workload", "meets_slos", "percentile", "read_dir", "read_records", "run_load", "shared_prefix_set",
    "special_corpus", "start_load", "summarize", "write_records",
]
