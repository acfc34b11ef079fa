"""Running a coroutine to its end from a synchronous test."""
import asyncio
from concurrent.futures import ThreadPoolExecutor


def run_to_end(coroutine):
    """`asyncio.run(coroutine)` in a thread of its own: a browser test earlier in the same test process
    leaves Playwright's event loop running in the main thread, where asyncio.run refuses to start."""
    with ThreadPoolExecutor(max_workers=1) as thread:
        return thread.submit(asyncio.run, coroutine).result()
