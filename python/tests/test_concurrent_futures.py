"""ferry.Future as a concurrent.futures.Future: wait, as_completed, add_done_callback, asyncio.wrap_future.

Issue 48, point 7 (B6): concurrent.futures.wait([fut]) raised AttributeError ('_condition'). Each test runs
under the suite's watchdog (conftest.py), so a future that is never announced fails the run instead of
hanging it. Slow requests come from slow_io.py (one 4 KiB task at a time over a sparse file).
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import gc
import json
import logging
import os
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path

import numpy as np
import pytest

import ferry
from slow_io import SLOW, SPARSE, aliased_buffer, make_sparse

IN_FLIGHT = 64
PIECE = 64 << 10
PROMPT_S = 2.0


@pytest.fixture
def pieces(make_file):
    """(path, data): IN_FLIGHT pieces of PIECE bytes."""
    return make_file(IN_FLIGHT * PIECE, seed=48)


@pytest.fixture
def slow_file(tmp_path: Path) -> Path:
    path = tmp_path / "sparse.bin"
    make_sparse(path)
    return path


def _start_reads(f: ferry.File, count: int = IN_FLIGHT):
    outs = [np.empty(PIECE, dtype=np.uint8) for _ in range(count)]
    return outs, [f.pread(out, offset=i * PIECE) for i, out in enumerate(outs)]


def _check(outs, data) -> None:
    for i, out in enumerate(outs):
        assert np.array_equal(out, data[i * PIECE:(i + 1) * PIECE]), f"piece {i}"


def test_a_ferry_future_is_a_concurrent_futures_future(make_file):
    path, _ = make_file(4096)
    with ferry.open(path) as f:
        fut = f.pread(bytearray(4096))
        assert isinstance(fut, cf.Future)
        # ferry.Future sets up what concurrent.futures.Future.__init__ sets (without calling it, to make its
        # Condition lazily): a Python that adds state there must show up here.
        for name in vars(cf.Future()):
            assert hasattr(fut, name), name
        assert fut.result() == 4096
        assert fut.done() and not fut.running() and not fut.cancelled()
        executor_calls = (lambda: fut.set_result(1), lambda: fut.set_exception(ValueError()),
                          fut.set_running_or_notify_cancel)
        for call in executor_calls:
            with pytest.raises(RuntimeError, match="executor"):
                call()
        assert fut.result() == 4096


def test_wait_for_all_of_many_futures_in_flight(pieces):
    path, data = pieces
    with ferry.open(path, task_size="16KiB") as f:
        outs, futs = _start_reads(f)
        done, not_done = cf.wait(futs, timeout=30)
    assert len(done) == IN_FLIGHT and not not_done
    assert all(fut.result() == PIECE for fut in futs)
    _check(outs, data)


def test_wait_for_futures_already_done_returns_at_once(pieces):
    path, data = pieces
    with ferry.open(path) as f:
        outs, futs = _start_reads(f, 8)
        for fut in futs:
            fut.result()
        start = time.monotonic()
        done, not_done = cf.wait(futs, timeout=0)  # settled or not, done requests count as done
        assert len(done) == 8 and not not_done
        assert time.monotonic() - start < PROMPT_S
    _check(outs, data)


def test_wait_first_completed_returns_the_fast_request_and_leaves_the_slow_one(pieces, slow_file):
    path, data = pieces
    with ferry.open(slow_file, **SLOW) as slow_f, ferry.open(path) as f:
        slow = slow_f.pread(aliased_buffer(SPARSE))
        out = np.empty(PIECE, dtype=np.uint8)
        fast = f.pread(out, offset=PIECE)
        done, not_done = cf.wait([slow, fast], timeout=30, return_when=cf.FIRST_COMPLETED)
        if slow in done:
            pytest.skip("the slow read finished first: this machine is too fast to tell")
        assert fast in done and slow in not_done
        assert slow.running() and not slow.done()
        assert slow.cancel() is True
        done, not_done = cf.wait([slow], timeout=30)
        assert slow in done and slow.cancelled()
    assert np.array_equal(out, data[PIECE:2 * PIECE])


def test_wait_first_exception_returns_on_a_failed_request(make_file, slow_file):
    path, _ = make_file(100)
    with ferry.open(slow_file, **SLOW) as slow_f, ferry.open(path) as f:
        slow = slow_f.pread(aliased_buffer(SPARSE))
        failing = f.pwrite(b"abc")  # opened for reading: the request fails
        start = time.monotonic()
        done, not_done = cf.wait([slow, failing], timeout=30, return_when=cf.FIRST_EXCEPTION)
        assert time.monotonic() - start < PROMPT_S
        assert failing in done
        error = failing.exception()
        assert isinstance(error, ferry.FerryError) and "opened for reading only" in str(error)
        with pytest.raises(ferry.FerryError, match="opened for reading only"):
            failing.result()
        slow.cancel()


def test_as_completed_yields_every_future_once(pieces, slow_file):
    path, data = pieces
    with ferry.open(slow_file, **SLOW) as slow_f, ferry.open(path, task_size="16KiB") as f:
        slow = slow_f.pread(aliased_buffer(SPARSE))
        outs, futs = _start_reads(f)
        seen = []
        for fut in cf.as_completed(futs, timeout=30):
            seen.append(fut)
            assert fut.done() and fut.result() == PIECE
        assert len(seen) == IN_FLIGHT and set(seen) == set(futs)
        # The slow read is still going: as_completed with a timeout gives up on it, and it goes on.
        with pytest.raises(cf.TimeoutError):
            for _ in cf.as_completed([slow], timeout=0.2):
                pytest.skip("the slow read finished within 0.2 s")
        assert not slow.done()
        slow.cancel()
        assert [x.cancelled() for x in cf.as_completed([slow], timeout=30)] == [True]
    _check(outs, data)


def test_wait_and_as_completed_from_several_threads_on_shared_futures(pieces):
    path, data = pieces
    with ferry.open(path, task_size="8KiB") as f:
        outs, futs = _start_reads(f)
        results = {}
        barrier = threading.Barrier(4)

        def waiter(k: int) -> None:
            barrier.wait()
            mine = futs[k % 2::2]  # every second future: each future has two waiters
            if k % 2:
                results[k] = sum(x.result() for x in cf.as_completed(mine, timeout=30))
            else:
                done, not_done = cf.wait(mine, timeout=30)
                results[k] = sum(x.result() for x in done) if not not_done else -1

        threads = [threading.Thread(target=waiter, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(50)
        assert not any(t.is_alive() for t in threads)
    assert results == {k: (IN_FLIGHT // 2) * PIECE for k in range(4)}
    _check(outs, data)


def test_a_cancel_from_another_thread_wakes_wait(slow_file):
    with ferry.open(slow_file, **SLOW) as f:
        fut = f.pread(aliased_buffer(SPARSE))
        threading.Timer(0.2, fut.cancel).start()
        start = time.monotonic()
        done, not_done = cf.wait([fut], timeout=30)
        assert time.monotonic() - start < 0.2 + PROMPT_S
    assert fut in done and not not_done
    if not fut.cancelled():
        pytest.skip("the read finished before cancel()")
    with pytest.raises(ferry.CancelledError):
        fut.result()


def test_closing_the_file_cancels_nothing_but_wait_sees_the_end(pieces):
    path, data = pieces
    f = ferry.open(path, task_size="8KiB")
    outs, futs = _start_reads(f, 16)
    closer = threading.Thread(target=f.close)
    closer.start()
    done, not_done = cf.wait(futs, timeout=30)
    closer.join(30)
    assert len(done) == 16 and not not_done and f.closed
    _check(outs, data)


def test_done_callbacks_run_once_in_order_and_errors_are_logged(pieces, caplog):
    path, _ = pieces
    calls = []
    with ferry.open(path, task_size="8KiB") as f:
        outs, futs = _start_reads(f, 16)
        for i, fut in enumerate(futs):
            fut.add_done_callback(lambda x, i=i: calls.append((i, "first", x.result())))
            fut.add_done_callback(lambda x, i=i: calls.append((i, "second", x.done())))
        futs[0].add_done_callback(lambda x: 1 / 0)  # logged, as concurrent.futures logs it
        cf.wait(futs, timeout=30)
        deadline = time.monotonic() + 10
        while len(calls) < 32 and time.monotonic() < deadline:
            time.sleep(0.001)
        # On a done future, a callback runs at once, on this thread.
        here = []
        futs[1].add_done_callback(lambda x: here.append(threading.current_thread()))
        assert here == [threading.current_thread()]
    assert sorted(calls) == sorted([(i, "first", PIECE) for i in range(16)] + [(i, "second", True) for i in range(16)])
    for i in range(16):
        assert calls.index((i, "first", PIECE)) < calls.index((i, "second", True))
    assert any("exception calling callback" in r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR)


def test_a_callback_runs_for_a_future_the_caller_dropped(make_file):
    path, data = make_file(1 << 20)
    seen = threading.Event()
    got = []
    with ferry.open(path, task_size="4KiB") as f:
        out = np.empty(data.size, dtype=np.uint8)
        f.pread(out).add_done_callback(lambda x: (got.append(x.result()), seen.set()))
        assert seen.wait(30)
    assert got == [data.size]
    assert np.array_equal(out, data)


def test_a_future_waited_for_then_dropped_is_not_kept(slow_file):
    # wait() holds its futures only while it waits: afterwards a dropped one is freed as before (its request
    # cancelled here first, else dropping it would wait for the whole read).
    with ferry.open(slow_file, **SLOW) as f:
        fut = f.pread(aliased_buffer(SPARSE))
        cf.wait([fut], timeout=0.05)
        fut.cancel()
        ref = weakref.ref(fut)
        del fut
        gc.collect()
        assert ref() is None


def test_asyncio_wrap_future_and_gather_of_many(pieces):
    path, data = pieces

    async def main():
        with ferry.open(path, task_size="8KiB") as f:
            outs, futs = _start_reads(f)
            got = await asyncio.gather(*(asyncio.wrap_future(x) for x in futs[: IN_FLIGHT // 2]),
                                       *futs[IN_FLIGHT // 2:])  # ferry futures are awaitable themselves
            return outs, got

    outs, got = asyncio.run(main())
    assert got == [PIECE] * IN_FLIGHT
    _check(outs, data)


def test_asyncio_wrap_future_raises_the_requests_error(make_file):
    path, _ = make_file(100)

    async def main():
        with ferry.open(path) as f:
            await asyncio.wrap_future(f.pwrite(b"abc"))

    with pytest.raises(ferry.FerryError, match="opened for reading only"):
        asyncio.run(main())


def test_cancelling_a_wrapped_future_cancels_the_request(slow_file):
    async def main():
        with ferry.open(slow_file, **SLOW) as f:
            fut = f.pread(aliased_buffer(SPARSE))
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.wrap_future(fut), timeout=0.2)
            return fut

    start = time.monotonic()
    fut = asyncio.run(main())
    assert time.monotonic() - start < 0.2 + PROMPT_S
    assert fut.done()
    if not fut.cancelled():
        pytest.skip("the read finished before the task was cancelled")


def test_an_event_loop_on_another_thread_awaits_ferry_futures(pieces):
    path, data = pieces
    with ferry.open(path) as f:
        outs, futs = _start_reads(f, 8)

        async def total() -> int:
            return sum(await asyncio.gather(*futs))

        box = {}
        t = threading.Thread(target=lambda: box.setdefault("n", asyncio.run(total())))
        t.start()
        t.join(30)
    assert box == {"n": 8 * PIECE}
    _check(outs, data)


# ---- other processes: exit with the ferry-futures thread running, fork, Ctrl-C during wait()

_CHILD = r"""
import concurrent.futures as cf, json, multiprocessing, os, signal, sys, threading, time
import numpy as np
import ferry
from slow_io import SLOW, SPARSE, aliased_buffer

scenario, path = sys.argv[1], sys.argv[2]
out = {}
if scenario == "exit":
    # Exits while the ferry-futures thread waits for announcements, and while requests with callbacks
    # complete (kept in a global, which the interpreter drops as it finalizes), so that the thread is woken
    # then. Before, it took the GIL back in a destructor, was ended there, and the process aborted at exit
    # ("terminate called without an active exception"), in every run of this.
    f = ferry.open(path, task_size="4KiB", threads=2)
    bufs = [np.empty(1 << 20, np.uint8) for _ in range(8)]
    cf.wait([f.pread(bufs[0])], timeout=30)
    in_flight = [f.pread(b) for b in bufs]
    for fut in in_flight:
        fut.add_done_callback(lambda x: None)
    print(json.dumps({"exiting": True}), flush=True)
elif scenario == "atexit":
    # A program's own exit handler still waits the standard library's way (ferry-futures runs to the end).
    import atexit
    f = ferry.open(path)
    cf.wait([f.pread(bytearray(4096))], timeout=30)  # the thread is running before the handler is added
    def at_exit():
        done, not_done = cf.wait([f.pread(bytearray(4096), offset=4096)], timeout=30)
        print(json.dumps({"done": len(done), "not_done": len(not_done)}), flush=True)
    atexit.register(at_exit)
elif scenario == "fork":
    # The parent's ferry-futures thread does not survive a fork: the child's wait() starts its own.
    f = ferry.open(path, task_size="4KiB")
    cf.wait([f.pread(bytearray(1 << 16))], timeout=30)
    def child(_):
        with ferry.open(path, task_size="4KiB") as g:
            futs = [g.pread(bytearray(1 << 16), offset=i << 16) for i in range(8)]
            done, not_done = cf.wait(futs, timeout=20)
            return len(done), len(not_done)
    with multiprocessing.get_context("fork").Pool(2) as pool:
        out["children"] = pool.map_async(child, range(2)).get(timeout=30)
    print(json.dumps(out), flush=True)
elif scenario == "ctrl_c":
    def fire():
        out["sent"] = time.monotonic()
        os.kill(os.getpid(), signal.SIGINT)
    try:
        with ferry.open(path, **SLOW) as f:
            futs = [f.pread(aliased_buffer(SPARSE)) for _ in range(2)]
            threading.Timer(0.3, fire).start()
            cf.wait(futs)
            out["finished"] = True
    except KeyboardInterrupt:
        out["latency"] = time.monotonic() - out.pop("sent")
        out["cancelled"] = [x.cancelled() for x in futs]
    print(json.dumps(out), flush=True)
"""


def _run_child(scenario: str, path: Path):
    package = Path(ferry.__file__).resolve().parents[1]
    tests = Path(__file__).resolve().parent
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(package), str(tests)]))
    proc = subprocess.run([sys.executable, "-c", _CHILD, scenario, str(path)], capture_output=True, text=True,
                          timeout=50, env=env)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    return proc, (json.loads(lines[-1]) if lines else None)


def test_the_interpreter_exits_cleanly_with_the_futures_thread_running(make_file):
    path, _ = make_file(8 << 20)
    for _ in range(3):
        proc, report = _run_child("exit", path)
        assert proc.returncode == 0, proc.stderr
        assert report == {"exiting": True}
        assert "terminate" not in proc.stderr and "Fatal" not in proc.stderr, proc.stderr


def test_an_exit_handler_can_still_wait_for_ferry_futures(pieces):
    path, _ = pieces
    proc, report = _run_child("atexit", path)
    assert proc.returncode == 0, proc.stderr
    assert report == {"done": 1, "not_done": 0}


def test_wait_works_in_a_child_forked_after_the_parent_waited(pieces):
    path, _ = pieces
    proc, report = _run_child("fork", path)
    assert proc.returncode == 0, proc.stderr
    assert report == {"children": [[8, 0], [8, 0]]}


def test_ctrl_c_during_wait_interrupts_it_and_the_with_block_cancels_the_requests(slow_file):
    proc, report = _run_child("ctrl_c", slow_file)
    assert proc.returncode == 0, proc.stderr
    if report.get("finished"):
        pytest.skip("the reads finished before the Ctrl-C")
    assert report["latency"] < PROMPT_S, report
    assert report["cancelled"] == [True, True], report
