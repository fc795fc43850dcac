"""Saved selections of images (issue 26): a group of one dataset's images kept by name in
the workspace's append-only `selections` table, reopened by name (its latest save), and the
`conceptlens selection save|list|show` commands.

One row per save, the ids in a list column (`image_ids`): a save is one small file of its
own (`Workspace.append`, written to a temporary name then renamed), never a rewrite of an
older one, and a selection reads back in one row. Saving a name again adds a row; the
latest save (by `created`) is the one the name stands for, the older ones stay as history.

Who may save from the dashboard is decided here, on the server (`save_as`), by the permission
table (conceptlens/permissions.py): the owner only (`CONCEPTLENS_OWNER_SECRET`, or every visitor
of a server listening on a loopback address); visitors may score a selection but write nothing.
A read-only deployment refuses every save (`CONCEPTLENS_READ_ONLY=1`).

Also here: the compact form of a small list of ids kept in a link (`encode_ids`,
`decode_ids`) and the ids of an uploaded CSV (`read_ids`).
"""

from __future__ import annotations

import base64
import datetime as _dt
import io
import zlib

import pandas as pd
import pyarrow as pa

from . import schema
from .errors import SelectionError
from .workspace import Workspace

TABLE = "selections"
MAX_NAME = 80  # characters of a selection's name
MAX_ORIGIN = 500  # characters of its origin
# A link carries a selection's ids only when it has at most this many (and the encoded text
# is at most URL_MAX_CHARS): anything larger is saved by name and linked by its name.
URL_MAX_IDS = 200
URL_MAX_CHARS = 6000
_PREFIX = "z"  # the encoding's version: zlib-compressed, newline-separated, base64url


# ---- validation ---------------------------------------------------------------------------------
def check_name(name) -> str:
    """A selection's name: 1..MAX_NAME printable characters, no leading or trailing space."""
    if not isinstance(name, str) or not name.strip():
        raise SelectionError("name: give a selection name (1 to 80 printable characters)")
    if len(name) > MAX_NAME:
        raise SelectionError(f"name: {len(name)} characters, at most {MAX_NAME} allowed")
    if not name.isprintable():
        raise SelectionError(f"name {name!r}: only printable characters (no tabs, newlines or controls)")
    if name != name.strip():
        raise SelectionError(f"name {name!r}: no leading or trailing spaces")
    return name


def check_origin(origin) -> str:
    if not isinstance(origin, str) or not origin.strip():
        raise SelectionError("origin: say where the selection came from (e.g. 'csv upload')")
    origin = " ".join(origin.split())
    if len(origin) > MAX_ORIGIN:
        raise SelectionError(f"origin: {len(origin)} characters, at most {MAX_ORIGIN} allowed")
    return origin


def _dataset_ids(ws: Workspace, dataset: str) -> set[str]:
    import pyarrow.compute as pc

    t = ws.read("images", columns=["image_id", "dataset"])
    ids = t.filter(pc.equal(t["dataset"], dataset))["image_id"].to_pylist()
    if not ids:
        known = sorted(set(t["dataset"].to_pylist()))
        raise SelectionError(
            f"dataset {dataset!r}: images.parquet has no image of it (datasets: {', '.join(known[:10])})"
        )
    return set(ids)


def check_ids(image_ids, allowed: set[str]) -> list[str]:
    """The ids once each, in their first order; every one must be in `allowed` (the
    dataset's images), so a selection is never larger than its dataset."""
    if isinstance(image_ids, str) or image_ids is None:
        raise SelectionError("image_ids: give a list of image ids")
    ids = list(dict.fromkeys(str(i) for i in image_ids))
    if not ids:
        raise SelectionError("image_ids: the selection holds no image")
    unknown = [i for i in ids if i not in allowed]
    if unknown:
        raise SelectionError(
            f"image_ids: {len(unknown)} id(s) are not images of this dataset, e.g. {unknown[0][:80]!r}"
        )
    return ids


# ---- writing ------------------------------------------------------------------------------------
def save(
    root,
    name: str,
    dataset: str,
    image_ids,
    origin: str,
    checkpoint: str | None = None,
    now: _dt.datetime | None = None,
) -> dict:
    """Append one save of selection `name` (a new part file of `selections/dataset=D/`;
    nothing older is rewritten). Returns the row written."""
    ws = Workspace(root)
    name, origin = check_name(name), check_origin(origin)
    ids = check_ids(image_ids, _dataset_ids(ws, dataset))
    if checkpoint is not None:
        ck = ws.read("checkpoints", columns=["checkpoint_id", "dataset"]).to_pandas()
        row = ck[ck["checkpoint_id"] == checkpoint]
        if row.empty:
            raise SelectionError(f"checkpoint {checkpoint!r}: not in checkpoints.parquet")
        if row["dataset"].iloc[0] != dataset:
            raise SelectionError(
                f"checkpoint {checkpoint!r} is of dataset {row['dataset'].iloc[0]!r}, not {dataset!r}"
            )
    created = (now or _dt.datetime.now(_dt.timezone.utc)).astimezone(_dt.timezone.utc)
    row = {
        "name": name,
        "image_ids": ids,
        "n_images": len(ids),
        "origin": origin,
        "checkpoint_id": checkpoint,
        "created": created,
    }
    table = pa.Table.from_pylist([row], schema=schema.arrow_schema(TABLE, partition=False))
    ws.append(TABLE, table, dataset=dataset)
    return {"dataset": dataset, **row}


def save_as(given_secret: str | None, address: str | None, root, **kw) -> dict:
    """`save`, for whoever asks from the dashboard, when the permission table lets them
    (conceptlens/permissions.py: the owner, on a deployment that is not read-only, into a
    workspace on disk), whatever the page shows: the role from the secret the session gave,
    the mode from the address the server listens on and the workspace's root."""
    from . import permissions as P  # local: the command's own, so --help stays light

    mode = P.mode_from_env(address, root)
    P.require(P.Action.SELECTION_SAVE, P.role_of(given_secret, mode), mode)
    return save(root, **kw)


# ---- reading (views: db is a conceptlens.db.WorkspaceDB) ------------------------------------------
def saved(db, dataset: str) -> pd.DataFrame:
    """The saved selections of a dataset, one row per name (its latest save), newest first:
    name, n_images, origin, checkpoint_id, created, saves (how many times it was saved)."""
    cols = ["name", "n_images", "origin", "checkpoint_id", "created", "saves"]
    if not db.has(TABLE):
        return pd.DataFrame(columns=cols)
    return db.query(
        """
        SELECT name, n_images, origin, checkpoint_id, created, saves FROM (
            SELECT *, count(*) OVER (PARTITION BY name) AS saves,
                   row_number() OVER (PARTITION BY name ORDER BY created DESC) AS r
            FROM selections WHERE dataset = $d)
        WHERE r = 1 ORDER BY created DESC, name""",
        {"d": dataset},
    )[cols]


def load(db, dataset: str, name: str) -> dict | None:
    """The latest save of selection `name` of `dataset` (None when there is none): name,
    dataset, image_ids (list), n_images, origin, checkpoint_id, created."""
    if not db.has(TABLE):
        return None
    t = db.query(
        "SELECT * FROM selections WHERE dataset = $d AND name = $n ORDER BY created DESC LIMIT 1",
        {"d": dataset, "n": name},
    )
    if t.empty:
        return None
    row = t.iloc[0].to_dict()
    row["image_ids"] = [str(i) for i in row["image_ids"]]
    return row


# ---- ids in a link, ids in a CSV --------------------------------------------------------------
def encode_ids(ids) -> str | None:
    """A short URL-safe text holding `ids` (zlib + base64url), or None when there are more than
    URL_MAX_IDS of them or the text would be longer than URL_MAX_CHARS."""
    ids = list(ids)
    if not ids or len(ids) > URL_MAX_IDS:
        return None
    raw = zlib.compress("\n".join(ids).encode(), 9)
    text = _PREFIX + base64.urlsafe_b64encode(raw).decode().rstrip("=")
    return text if len(text) <= URL_MAX_CHARS else None


def decode_ids(text: str) -> list[str]:
    """The ids `encode_ids` wrote; ValueError for anything else (a link is untrusted: the
    text's length and the decompressed size are bounded)."""
    if not isinstance(text, str) or not text.startswith(_PREFIX) or len(text) > URL_MAX_CHARS:
        raise ValueError("not a list of image ids")
    body = text[len(_PREFIX) :]
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        d = zlib.decompressobj()
        out = d.decompress(raw, URL_MAX_IDS * 1024)
        if d.unconsumed_tail or not d.eof:
            raise ValueError("too long")
    except (ValueError, zlib.error) as e:
        raise ValueError(f"not a list of image ids ({e})") from None
    ids = out.decode("utf-8", errors="strict").split("\n")
    if not ids or len(ids) > URL_MAX_IDS or any(not i for i in ids):
        raise ValueError("not a list of image ids")
    return ids


def read_ids(source, what: str = "CSV") -> list[str]:
    """Image ids of a CSV (a path, bytes or a file): its `image_id` column, or its first
    column when it has none; blank cells are skipped."""
    if isinstance(source, bytes):
        source = io.BytesIO(source)
    try:
        t = pd.read_csv(source, dtype=str)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise SelectionError(f"{what}: not a readable CSV ({str(e).splitlines()[0][:120]})") from None
    col = "image_id" if "image_id" in t.columns else t.columns[0] if len(t.columns) else None
    if col is None:
        raise SelectionError(f"{what}: no column of image ids")
    ids = [i.strip() for i in t[col].dropna().tolist() if i.strip()]
    if not ids:
        raise SelectionError(f"{what}: column {col!r} holds no image id")
    return ids


# ---- the command line ---------------------------------------------------------------------------
def _save_cmd(args) -> int:
    ids = read_ids(args.ids, args.ids)
    origin = args.origin or f"csv upload ({args.ids})"
    row = save(args.workspace, args.name, args.dataset, ids, origin, checkpoint=args.checkpoint)
    print(f"saved selection {row['name']!r} of {row['dataset']}: {row['n_images']} images ({row['origin']})")
    return 0


def _list_cmd(args) -> int:
    from .db import WorkspaceDB  # local: the command's own, so --help stays light

    db = WorkspaceDB(args.workspace)
    try:
        t = saved(db, args.dataset)
    finally:
        db.close()
    if t.empty:
        print(f"no saved selection of dataset {args.dataset}")
        return 0
    for r in t.itertuples():
        print(
            f"{r.name}\t{r.n_images} images\t{r.created:%Y-%m-%d %H:%M:%S} UTC\t{r.saves} save(s)\t{r.origin}"
        )
    return 0


def _show_cmd(args) -> int:
    from .db import WorkspaceDB  # local: the command's own, so --help stays light

    db = WorkspaceDB(args.workspace)
    try:
        row = load(db, args.dataset, args.name)
    finally:
        db.close()
    if row is None:
        raise SelectionError(f"name {args.name!r}: no saved selection of dataset {args.dataset} has it")
    if args.ids:
        print("image_id")
        print("\n".join(row["image_ids"]))
        return 0
    print(f"name: {row['name']}\ndataset: {row['dataset']}\nimages: {row['n_images']}")
    print(f"origin: {row['origin']}\ncheckpoint: {row['checkpoint_id'] or '-'}")
    print(f"created: {row['created']:%Y-%m-%d %H:%M:%S} UTC")
    return 0


def register(sub, parents) -> None:
    p = sub.add_parser("selection", help="saved selections of images: save, list, show")
    ssub = p.add_subparsers(dest="selection_command", required=True)
    s = ssub.add_parser(
        "save", parents=parents, help="save a CSV of image ids as a named selection (append-only)"
    )
    s.add_argument("--dataset", required=True, help="dataset of the images")
    s.add_argument("--name", required=True, help=f"selection name (1 to {MAX_NAME} printable characters)")
    s.add_argument(
        "--ids",
        required=True,
        metavar="FILE.csv",
        help="CSV of image ids (an `image_id` column, or the first)",
    )
    s.add_argument("--origin", help="where the selection came from (default: csv upload (FILE))")
    s.add_argument("--checkpoint", help="checkpoint it was drawn on, if any")
    s.set_defaults(func=_save_cmd)
    ls = ssub.add_parser("list", parents=parents, help="the saved selections of a dataset, newest first")
    ls.add_argument("--dataset", required=True, help="dataset")
    ls.set_defaults(func=_list_cmd)
    sh = ssub.add_parser("show", parents=parents, help="one saved selection (its latest save)")
    sh.add_argument("--dataset", required=True, help="dataset")
    sh.add_argument("--name", required=True, help="selection name")
    sh.add_argument("--ids", action="store_true", help="print its image ids as CSV instead")
    sh.set_defaults(func=_show_cmd)


# ---- where a selection comes from (views) -----------------------------------------------------
# Images' columns that are not factors: the core columns of images.parquet (label included).
IMAGE_CORE = {c.name for c in schema.CORE_BY_NAME["images"].columns}
# A numeric factor with more distinct values than this is continuous: no purity, no histogram.
MAX_FACTOR_VALUES = 50


def factor_columns(meta: pd.DataFrame) -> list[str]:
    """The categorical factor columns of these images: every non-core column with a value,
    except numeric ones with more than MAX_FACTOR_VALUES distinct values. What `choices` offers
    and conceptlens.views.selection scores; it lives here because that view also reads saved
    selections from this module, and an import the other way back would close a cycle."""
    out = []
    for c in meta.columns:
        s = meta[c]
        if c in IMAGE_CORE or not s.notna().any():
            continue
        numeric = pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s)
        if numeric and s.nunique() > MAX_FACTOR_VALUES:
            continue
        out.append(c)
    return out


def dataset_images(db, dataset: str) -> pd.DataFrame:
    """The dataset's images.parquet rows (image_id, label, label_name, factor columns)."""
    return db.query("SELECT * FROM images WHERE dataset = $d ORDER BY image_id", {"d": dataset})


def choices(db, dataset: str) -> pd.DataFrame:
    """What a selection by value may pick: `column` (`label` or a factor column of the
    dataset, as conceptlens.views.selection scores them), `value` (as text), `name` (the
    label's name, else the value) and `images` (how many), by column then value."""
    meta = dataset_images(db, dataset)
    out = []
    cols = (["label"] if "label" in meta and meta["label"].notna().any() else []) + factor_columns(meta)
    for col in cols:
        values = meta[col].astype("string")
        counts = values.value_counts(dropna=True)
        names = {}
        if col == "label" and "label_name" in meta:
            names = dict(zip(values, meta["label_name"].astype("string")))
        for v, n in counts.items():
            name = names.get(v)
            out.append(
                {
                    "column": col,
                    "value": str(v),
                    "name": str(name) if isinstance(name, str) else str(v),
                    "images": int(n),
                }
            )
    t = pd.DataFrame(out, columns=["column", "value", "name", "images"])
    if t.empty:
        return t
    numeric = pd.to_numeric(t["value"], errors="coerce")
    return (
        t.assign(_n=numeric)
        .sort_values(["column", "_n", "value"], key=None, na_position="last")
        .drop(columns="_n")
        .reset_index(drop=True)
    )


def ids_where(db, dataset: str, column: str, value: str) -> list[str]:
    """The ids of the dataset's images whose `column` (label or a factor) is `value` (as text)."""
    meta = dataset_images(db, dataset)
    allowed = set(choices(db, dataset)["column"])
    if column not in allowed:
        raise SelectionError(
            f"column {column!r}: not a label or factor column of dataset {dataset!r} "
            f"(columns: {', '.join(sorted(allowed)) or 'none'})"
        )
    hit = meta[column].astype("string").to_numpy() == str(value)
    return meta.loc[hit, "image_id"].astype(str).tolist()
