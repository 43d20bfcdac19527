#!/usr/bin/env python3
"""A streaming Wyoming 1.7 conversation client on the reference (rhasspy)
wyoming package: sends a transcript and reads the answer as a client that
streams it into TTS does, handled-start, handled-chunk..., handled,
handled-stop, printing one JSON line per event with the seconds since the
transcript was sent.

  wyoming-stream.py WYOMING_PACKAGE_DIR HOST:PORT TEXT
The package's HandledStart/HandledChunk/HandledStop classes are used when it
has them (wyoming >= 1.7 as published), else the events are read by type."""
import asyncio, json, os, sys, time

sys.path.insert(0, sys.argv[1])
from wyoming.client import AsyncTcpClient
from wyoming.asr import Transcript
from wyoming.handle import Handled, NotHandled

try:
    from wyoming.handle import HandledChunk, HandledStart, HandledStop

    is_start, is_chunk, is_stop = HandledStart.is_type, HandledChunk.is_type, HandledStop.is_type
    chunk_text = lambda ev: HandledChunk.from_event(ev).text
except ImportError:
    is_start = lambda t: t == "handled-start"
    is_chunk = lambda t: t == "handled-chunk"
    is_stop = lambda t: t == "handled-stop"
    chunk_text = lambda ev: ev.data["text"]


async def main():
    host, port = sys.argv[2].rsplit(":", 1)
    async with AsyncTcpClient(host, int(port)) as c:
        t0 = time.monotonic()
        await c.write_event(Transcript(text=sys.argv[3]).event())
        while True:
            ev = await asyncio.wait_for(c.read_event(), timeout=60)
            if ev is None:
                sys.exit(1)
            out = {"type": ev.type, "t": time.monotonic() - t0}
            if is_chunk(ev.type):
                out["text"] = chunk_text(ev)
            elif Handled.is_type(ev.type):
                out["text"] = Handled.from_event(ev).text
            elif is_start(ev.type):
                out["context"] = (ev.data or {}).get("context")
            print(json.dumps(out), flush=True)
            if is_stop(ev.type) or NotHandled.is_type(ev.type):
                return


asyncio.run(main())
