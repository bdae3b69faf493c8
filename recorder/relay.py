"""Byte-exact relay threads on raw file descriptors.

Threads, not asyncio: measured here, a thread relay adds about what an extra `cat` hop adds,
asyncio adds ~100 us. A thread only queues each chunk in memory for the spool writer before
writing it on; no disk or parsing work sits between a read and the write it feeds.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from .spool import write_all

READ_SIZE = 64 * 1024  # 1 MiB reads measured 2x slower than 64 KiB here


class Pump(threading.Thread):
    """Copies src_fd to dst_fd until EOF, recording every chunk it moved."""

    def __init__(self, name: str, src_fd: int, dst_fd: int | None,
                 record: Callable[[bytes], None] | None,
                 on_eof: Callable[[], None] | None = None,
                 on_dst_error: Callable[[OSError], None] | None = None,
                 on_src_error: Callable[[OSError], None] | None = None):
        super().__init__(name=name, daemon=True)
        self.src_fd = src_fd
        self.dst_fd = dst_fd
        self.record = record
        self.on_eof = on_eof
        self.on_dst_error = on_dst_error
        self.on_src_error = on_src_error
        self.bytes = 0

    def run(self) -> None:
        src, dst, record = self.src_fd, self.dst_fd, self.record
        read = os.read
        try:
            while True:
                try:
                    data = read(src, READ_SIZE)
                except OSError as e:
                    if self.on_src_error:
                        self.on_src_error(e)
                    break
                if not data:
                    break
                self.bytes += len(data)
                if record is not None:
                    # Queued before the write (an in-memory append, about a microsecond): a
                    # peer's instant answer must never be recorded ahead of what it answers.
                    record(data)
                if dst is not None:
                    try:
                        write_all(dst, data)
                    except OSError as e:
                        # The reader went away (client hang-up, agent closed stdin). Keep
                        # reading so the rest is still recorded and the writer never blocks.
                        dst = None
                        if self.on_dst_error:
                            self.on_dst_error(e)
        finally:
            if self.on_eof:
                self.on_eof()
