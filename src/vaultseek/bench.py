"""Warm query latency: each query runs in each mode, in one process, after a warm-up."""

from __future__ import annotations

import time

import numpy as np

from .search import Searcher

# A realistic mix for a technical vault: identifiers, short keyword queries, questions, phrases,
# and queries full of very common words (the OR-query tail).
DEFAULT_QUERIES = (
    "CreateFileW",
    "RegOpenKeyEx",
    "WM_PAINT",
    "GetLastError return value",
    "ERROR_ACCESS_DENIED",
    "HRESULT E_INVALIDARG",
    "IUnknown QueryInterface",
    "CoCreateInstance",
    "how do I read a registry key",
    "how to create a window with a title bar",
    "what is the difference between a process and a thread",
    "enumerate all running processes",
    "send a message to another window",
    "memory mapped file shared between processes",
    "asynchronous I/O completion port",
    "print a document",
    "draw text with a font",
    "the function returns a handle to the new window",
    "if the function fails the return value is zero",
    "to get extended error information call GetLastError",
    "security descriptor access control list",
    "named pipe server",
    "clipboard format",
    "high DPI scaling",
    "unicode and ANSI versions of functions",
    "keyboard input focus",
    "timer callback",
    "notes about oauth token rotation",
    "meeting notes project plan",
    "kernel object handle inheritance",
)


def default_queries() -> list[str]:
    return list(DEFAULT_QUERIES)


def _percentiles(samples: list[float]) -> dict[str, float]:
    arr = np.asarray(samples) * 1000.0
    return {
        "p50_ms": round(float(np.percentile(arr, 50)), 3),
        "p95_ms": round(float(np.percentile(arr, 95)), 3),
        "max_ms": round(float(arr.max()), 3),
        "queries": len(samples),
    }


def run_bench(searcher: Searcher, queries: list[str], rounds: int = 5, modes: tuple[str, ...] = ("hybrid", "bm25", "vector")) -> dict[str, dict[str, float]]:
    """p50/p95 milliseconds per mode, including embedding the query and fetching the results."""
    for mode in modes:  # warm up: load the model and vectors, fill caches (as a resident process has)
        for q in queries:
            searcher.search(q, mode=mode)
    report: dict[str, dict[str, float]] = {}
    for mode in modes:
        samples: list[float] = []
        for _ in range(rounds):
            for q in queries:
                started = time.perf_counter()
                searcher.search(q, mode=mode)
                samples.append(time.perf_counter() - started)
        report[mode] = _percentiles(samples)
    return report
