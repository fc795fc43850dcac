"""A participant without a browser: Streamlit's own websocket protocol, as the browser speaks it.

The client connects to `/_stcore/stream`, asks for a script run with the page's query string
(`BackMsg.rerun_script`), reads the elements the run sends (`ForwardMsg.delta`) until the run
finishes, and clicks a button the way the browser does: a rerun whose widget states carry the
button's trigger. Used by the study tests and bench/studies.py to drive many participants at
once through the real running app.

An answer counts as acknowledged when the run that follows its click shows the next task (or
the thank-you page): the page draws that only after the answer's transaction committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import re
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs

from harness.browser import ARTIFACTS, ROOT, free_port, server_command

TASK = re.compile(r"Task (\d+) of (\d+)")


@dataclass
class Run:
    """What one script run drew: buttons (key -> widget id), progress text, headings, code."""

    buttons: dict[str, str] = field(default_factory=dict)
    inputs: dict[str, str] = field(default_factory=dict)  # text inputs: key -> widget id
    progress: list[str] = field(default_factory=list)
    headings: list[str] = field(default_factory=list)
    markdown: list[str] = field(default_factory=list)
    codes: list[str] = field(default_factory=list)
    alerts: list[str] = field(default_factory=list)
    exceptions: list[str] = field(default_factory=list)
    raw: list[bytes] = field(default_factory=list)  # every message, as sent

    @property
    def task(self) -> tuple[int, int] | None:
        """(1-based task number, total) of the progress bar, None without one."""
        for text in self.progress:
            m = TASK.search(text)
            if m:
                return int(m.group(1)), int(m.group(2))
        return None

    @property
    def finished(self) -> bool:
        return "Thank you!" in self.headings


class Client:
    def __init__(self, url: str, query: str, cookies: dict | None = None, page: str = ""):
        self.url, self.query, self.cookies, self.page = url, query, cookies or {}, page
        self._ws = None

    async def connect(self) -> None:
        from websockets.asyncio.client import connect

        headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())} if self.cookies else None
        self._ws = await connect(
            self.url.replace("http://", "ws://") + "/_stcore/stream",
            subprotocols=["streamlit"],
            additional_headers=headers,
            max_size=None,
            open_timeout=30,
        )

    async def close(self) -> None:
        if self._ws is not None:
            with contextlib.suppress(Exception):
                await self._ws.close()
            self._ws = None

    async def run(self, click: str | None = None, timeout: float = 120, texts: dict | None = None) -> Run:
        """Ask for a script run (clicking the button whose widget id is `click`) and collect
        what the run draws, until a run finishes normally."""
        from streamlit.proto.BackMsg_pb2 import BackMsg
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        msg = BackMsg()
        msg.rerun_script.query_string = self.query
        msg.rerun_script.page_name = self.page  # the URL path: "" the default page, "studies", ...
        if click is not None:
            w = msg.rerun_script.widget_states.widgets.add()
            w.id = click
            w.trigger_value = True
        for wid, value in (texts or {}).items():  # text inputs' values (widget id -> text)
            w = msg.rerun_script.widget_states.widgets.add()
            w.id = wid
            w.string_value = value
        await self._ws.send(msg.SerializeToString())
        run = Run()
        deadline = time.monotonic() + timeout
        while True:
            data = await asyncio.wait_for(self._ws.recv(), max(0.1, deadline - time.monotonic()))
            fm = ForwardMsg()
            fm.ParseFromString(data)
            kind = fm.WhichOneof("type")
            if kind == "new_session":
                run = Run()  # a (re)run starts: what came before belongs to an older run
            elif kind == "page_info_changed":
                self.query = fm.page_info_changed.query_string
            elif kind == "delta" and fm.delta.WhichOneof("type") == "new_element":
                run.raw.append(data)
                _collect(run, fm.delta.new_element)
            elif kind == "script_finished":
                if fm.script_finished == ForwardMsg.FINISHED_SUCCESSFULLY:
                    return run


def _collect(run: Run, el) -> None:
    t = el.WhichOneof("type")
    if t == "button":
        key = el.button.id.split("-", 2)[-1]
        run.buttons[key] = el.button.id
    elif t == "text_input":
        run.inputs[el.text_input.id.split("-", 2)[-1]] = el.text_input.id
    elif t == "progress":
        run.progress.append(el.progress.text)
    elif t == "heading":
        run.headings.append(el.heading.body)
    elif t == "markdown":
        run.markdown.append(el.markdown.body)
    elif t == "code":
        run.codes.append(el.code.code_text)
    elif t == "alert":
        run.alerts.append(el.alert.body)
    elif t == "exception":
        run.exceptions.append(el.exception.message)


# ---- a simulated participant ----------------------------------------------------------------
@dataclass
class Outcome:
    participant_id: str
    acked: list[int] = field(default_factory=list)  # 0-based positions acknowledged
    code: str | None = None
    reconnects: int = 0
    seconds: list[float] = field(default_factory=list)  # click -> acknowledgement


async def participate(
    url: str,
    study: str,
    participant_id: str,
    seed: int = 0,
    outcome: Outcome | None = None,
    retry_until: float | None = None,
    stop_after: int | None = None,
    timeout: float = 120,
    respond=None,
) -> Outcome:
    """Answer every task of `study` as `participant_id` (2AFC: a random side; 8-rank-2: two
    random references, then Submit). A dropped connection (the server was killed) is retried
    until `retry_until` (a time.monotonic() value): the participant reconnects and resumes."""
    rng = random.Random(seed)
    out = outcome or Outcome(participant_id)
    while True:
        client = Client(url, f"study={study}&p={out.participant_id}")
        try:
            await client.connect()
            view = await client.run(timeout=timeout)
            # The server issues the participant id (an id it did not issue gets a new place):
            # the page puts it into the link, and a reconnection resumes with it.
            issued = parse_qs(client.query).get("p")
            if issued:
                out.participant_id = issued[0]
            while not view.finished:
                if any("cannot be reached right now" in a for a in view.alerts):
                    out.reconnects += 1  # the store was busy: as a person would, reload later
                    await asyncio.sleep(1)
                    view = await client.run(timeout=timeout)
                    continue
                if view.task is None:
                    raise AssertionError(
                        f"{participant_id}: no task and no thank-you: {view.alerts} {view.exceptions}"
                    )
                if stop_after is not None and len(out.acked) >= stop_after:
                    return out
                n = view.task[0] - 1
                t0 = time.monotonic()
                # `respond(participant_id)`: a simulated observer's answer (conceptlens.studies.plan).
                said = respond(out.participant_id) if respond else None
                if f"answer-{n}-left" in view.buttons:
                    side = said or rng.choice(("left", "right"))
                    view = await client.run(view.buttons[f"answer-{n}-{side}"], timeout)
                else:
                    for i in said or rng.sample(range(8), 2):
                        view = await client.run(view.buttons[f"pick-{n}-{i}"], timeout)
                    view = await client.run(view.buttons[f"submit-{n}"], timeout)
                if view.finished or (view.task is not None and view.task[0] - 1 > n):
                    out.acked.append(n)
                    out.seconds.append(time.monotonic() - t0)
            out.code = next((c for c in view.codes), None)
            return out
        except Exception as e:
            from websockets.exceptions import WebSocketException

            # A killed server: the connection drops, or is refused until the new one listens.
            dropped = isinstance(e, (OSError, asyncio.TimeoutError, EOFError, WebSocketException))
            if not dropped or retry_until is None or time.monotonic() > retry_until:
                raise
            out.reconnects += 1
            await asyncio.sleep(0.5)
        finally:
            await client.close()


# ---- a server that can be killed ------------------------------------------------------------
class Server:
    """`streamlit run serve.py` (app.py behind the caching middleware) on `workspace` in its
    own process group, so SIGKILL takes the whole server at once, as a crash or an
    out-of-memory kill would."""

    def __init__(self, workspace, env: dict, port: int | None = None):
        self.workspace, self.env = workspace, env
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = None

    def start(self, timeout: float = 120) -> None:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        log = open(ARTIFACTS / f"streamlit-{self.port}.log", "a")
        self.proc = subprocess.Popen(
            server_command(self.workspace, self.port),
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "HF_HUB_OFFLINE": "1", **self.env},
            start_new_session=True,
        )
        log.close()
        deadline = time.time() + timeout
        while True:
            try:
                with urllib.request.urlopen(self.url + "/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"streamlit did not start; see {ARTIFACTS}/streamlit-{self.port}.log")
            time.sleep(0.3)

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, nothing is flushed."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()


def workspace_for_bench(root: Path):
    """The tiny factory workspace (3 usable clusters of ck0 at k=4): quick to serve."""
    from harness.factory import make_workspace

    return make_workspace(root, derived=True)
