"""What a participant's page may show of a task, and how an answer is graded.

The page gets a `Shown`: images to draw (a thumbnail path, mirrored or not, or a blank), a
description, nothing else. Which of the two candidates is the cluster's, or which reference is
the mirrored query, stays on the server: `grade` needs the task and its slot's layout, which
only the store holds. So two slots of the same task whose correct sides differ give Showns that
differ only in the order of the candidates.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

from ..cache import cached
from ..workspace import inside
from .design import N_REFERENCES, N_SELECT, SIDES, StudyError


@dataclass(frozen=True)
class Picture:
    path: str | None  # thumbnail relative to the workspace; None: a blank image
    mirrored: bool = False


@dataclass(frozen=True)
class Shown:
    kind: str  # coherence, describability, similarity
    references: tuple[Picture, ...]  # coherence references, or the 8 references in display order
    description: str | None = None
    candidates: tuple[Picture, ...] = ()  # 2AFC: (left, right)
    query: Picture | None = None  # similarity


def shown(kind: str, payload: dict, layout: dict, images: dict[str, str]) -> Shown:
    def pic(image_id, mirrored=False):
        return Picture(None if image_id is None else images[image_id], mirrored)

    if kind == "similarity":
        q = payload["query"]
        refs = [payload["references"][i] for i in layout["order"]]
        return Shown(kind, tuple(pic(r, mirrored=r == q) for r in refs), query=pic(q))
    pair = [pic(payload["positive"]), pic(payload["negative"])]
    if layout["positive_side"] == "right":
        pair.reverse()
    return Shown(
        kind,
        tuple(pic(r) for r in payload.get("references", ())),
        description=payload.get("description"),
        candidates=tuple(pair),
    )


def check_response(kind: str, response, task_id: str):
    """The response as stored, or a StudyError saying what a valid one is."""
    if kind == "similarity":
        ok = (
            isinstance(response, (list, tuple))
            and len(response) == N_SELECT
            and all(
                isinstance(i, int) and not isinstance(i, bool) and 0 <= i < N_REFERENCES for i in response
            )
            and len(set(response)) == N_SELECT
        )
        if not ok:
            raise StudyError(
                f"answer to task {task_id}: must be {N_SELECT} different reference positions in "
                f"0..{N_REFERENCES - 1}, in choice order; got {short(response)}"
            )
        return [int(i) for i in response]
    if not isinstance(response, str) or response not in SIDES:
        raise StudyError(f"answer to task {task_id}: must be 'left' or 'right'; got {short(response)}")
    return response


def grade(kind: str, is_catch: bool, payload: dict, layout: dict, response) -> dict:
    """{"correct", "grade", "chosen"} of a checked response. 2AFC: correct = the cluster's image
    was picked; a catch task's grade is 1 or 0. 8-rank-2 catch trials (roads2021 4.1): 1 when
    the mirrored query is the first choice, 0.5 the second, 0 otherwise."""
    if kind == "similarity":
        refs = [payload["references"][i] for i in layout["order"]]
        chosen = [refs[i] for i in response]
        g = None
        if is_catch:
            q = payload["query"]
            g = 1.0 if chosen[0] == q else 0.5 if chosen[1] == q else 0.0
        return {"correct": None, "grade": g, "chosen": chosen}
    correct = response == layout["positive_side"]
    picked = payload["positive"] if correct else payload["negative"]
    return {
        "correct": correct,
        "grade": (1.0 if correct else 0.0) if is_catch else None,
        "chosen": [picked] if picked is not None else [],
    }


def short(value, limit: int = 60) -> str:
    """A bounded description of a value from a request: a huge one is not copied whole."""
    if isinstance(value, (str, bytes)) and len(value) > limit:
        return f"{value[:limit]!r}… ({len(value):,} characters)"
    if isinstance(value, (list, tuple, dict, set)) and len(value) > 8:
        return f"a {type(value).__name__} of {len(value):,} items"
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}…"


# ---- image bytes ------------------------------------------------------------------------------
BLANK_GREY = (200, 200, 200)


def picture_bytes(root: str, picture: Picture, side: int = 320) -> bytes:
    """PNG bytes of a picture, re-encoded (no metadata survives) and scaled so its longer side
    is `side` pixels: judgeable on screen whatever the thumbnail's size."""
    if picture.path is None:
        return _encoded(None, 0, 0, False, side)
    p = _inside(root, picture.path)
    st = p.stat()
    return _encoded(str(p), st.st_mtime_ns, st.st_size, picture.mirrored, side)


@cached(reads=(), maxsize=16384)
def _inside(root: str, rel: str) -> Path:
    # Resolving a path costs a system call per component: once per thumbnail is enough.
    return inside(Path(root), rel)


@cached(reads=(), maxsize=4096)
def _encoded(path: str | None, mtime: int, size: int, mirrored: bool, side: int) -> bytes:
    # The file's version is its modification time and size: a thumbnail replaced under the
    # same path is encoded again.
    from PIL import Image, ImageOps  # local: off the dashboard's cold start

    if path is None:
        img = Image.new("RGB", (side, side), BLANK_GREY)
    else:
        with Image.open(path) as im:
            img = im.convert("RGB")
        scale = side / max(img.size)
        # Small thumbnails are enlarged without smoothing, so their pixels stay as they are.
        method = Image.NEAREST if scale >= 2 else Image.LANCZOS
        img = img.resize((max(1, round(img.width * scale)), max(1, round(img.height * scale))), method)
        if mirrored:
            img = ImageOps.mirror(img)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()
