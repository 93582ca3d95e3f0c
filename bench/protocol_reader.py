"""Readers without a browser, for the case-change benchmark's "four readers at once".

Four readers of the guide have four computers: each one's Chromium draws its own page. On this
two-core machine four Chromiums would share the server's two cores (each spends ~0.3-0.5 s of
CPU drawing one case change), so the figure would measure the browsers' fight as much as the
server's answers. Here one reader is a real Chromium, timed as before, and the three others
speak Streamlit's websocket protocol as their page would: the very messages a browser sent
(recorded once per chapter from a real page: its first run, then a case change with every
widget's state), each with a case value of its own, each change sent once the last one's run
has finished and the reader has waited as long as a browser reader does before its next change.
The server does for them everything it does for a browser (runs the chapter, sends every
message); nothing is drawn.
"""

from __future__ import annotations

import asyncio
import time

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

RUN_TIMEOUT_S = 60


class Recorder:
    """The binary messages a page sends on its websocket (Playwright's framesent), in order."""

    def __init__(self, page) -> None:
        self.sent: list[bytes] = []
        page.on("websocket", lambda socket: socket.on("framesent", self._keep))

    def _keep(self, payload) -> None:
        if isinstance(payload, bytes):
            self.sent.append(payload)

    def reruns(self) -> list[bytes]:
        """The rerun requests among them (a page also sends heartbeats and file requests)."""
        return [payload for payload in self.sent if _kind(payload) == "rerun_script"]


def _kind(payload: bytes) -> str | None:
    message = BackMsg()
    message.ParseFromString(payload)
    return message.WhichOneof("type")


def with_case_value(rerun: bytes, field: str, value: str) -> bytes:
    """The recorded rerun request with the case bar's `field` set to `value` (typed as the
    widget's state is) and no cached message hashes: this reader keeps none, so the server
    sends it every message in full, as to a browser opening the page."""
    message = BackMsg()
    message.ParseFromString(rerun)
    state = message.rerun_script
    del state.cached_message_hashes[:]
    for widget in state.widget_states.widgets:
        if widget.id.endswith(f"-case_{field}"):
            kind = widget.WhichOneof("value")
            if kind == "string_value":
                widget.string_value = value
            elif kind == "int_value":
                widget.int_value = int(value)
            elif kind == "double_value":
                widget.double_value = float(value)
            else:
                raise ValueError(f"case_{field} holds a {kind}, which this reader cannot set")
            return message.SerializeToString()
    raise ValueError(f"the recorded rerun has no case_{field} widget")


async def run_once(socket, request: bytes) -> float:
    """Send a rerun request and read every message until the run has finished; its seconds."""
    start = time.perf_counter()
    await socket.send(request)
    async with asyncio.timeout(RUN_TIMEOUT_S):
        while True:
            message = ForwardMsg()
            message.ParseFromString(await socket.recv())
            if message.WhichOneof("type") == "script_finished":
                return time.perf_counter() - start


async def protocol_reader(url: str, opening: bytes, change: bytes, field: str, values: list[str],
                          pause_s: float, stop: asyncio.Event) -> list[float]:
    """Open the chapter (`opening`, the page's first rerun request), then change the case to
    each of `values` in turn until `stop` is set; the seconds of each change's run."""
    import websockets

    address = url.replace("http", "ws", 1) + "/_stcore/stream"
    times = []
    async with websockets.connect(address, subprotocols=["streamlit"], origin=url, max_size=None) as socket:
        await run_once(socket, opening)
        for value in values:
            if stop.is_set():
                break
            await asyncio.sleep(pause_s)
            times.append(await run_once(socket, with_case_value(change, field, value)))
    return times
