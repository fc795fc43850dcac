"""CompMap tables for the factory workspace (harness/factory.py), written by hand: a VL model
`vl-toy` of dataset `toy`, primitives colour x3 and shape x2, each class (a colour) defined
by its colour, and scores, weights and activations that agree with each other."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from conceptlens import schema

COLORS, SHAPES = ("red", "green", "blue"), ("circle", "square")
VL = "vl-toy"


def _write(ws, name: str, rows: list[dict], **partition) -> None:
    ws.write(name, pa.Table.from_pylist(rows, schema=schema.arrow_schema(name, partition=False)), **partition)


def write_compmap(ws, seed: int = 0) -> None:
    img = ws.read("images").to_pandas().sort_values("image_id")
    ids, labels, shapes = img["image_id"].tolist(), img["label"].tolist(), img["shape"].tolist()
    rng = np.random.default_rng(seed + 2)
    prims = [("color", c) for c in COLORS] + [("shape", s) for s in SHAPES]
    ws.write(
        "vl_models",
        pa.Table.from_pylist(
            [
                {
                    "vl_model_id": VL,
                    "dataset": "toy",
                    "spec": "open_clip:toy",
                    "config": None,
                    "weights": None,
                    "weights_sha256": None,
                }
            ],
            schema=schema.arrow_schema("vl_models"),
        ),
    )
    _write(
        ws,
        "primitives",
        [
            {
                "primitive": f"{g}:{v}",
                "group": g,
                "value": v,
                "prompt": f"a {v}",
                "position": i,
                "normalize": "softmax",
            }
            for i, (g, v) in enumerate(prims)
        ],
        dataset="toy",
    )
    _write(
        ws,
        "label_primitives",
        [
            {"label": c, "label_name": name, "primitive": f"color:{name}", "value": 1.0}
            for c, name in enumerate(COLORS)
        ],
        dataset="toy",
    )
    _write(
        ws,
        "image_primitives",
        [
            {"image_id": i, "primitive": p, "value": 1.0}
            for i, c, s in zip(ids, labels, shapes)
            for p in (f"color:{COLORS[c]}", f"shape:{s}")
        ],
        dataset="toy",
    )
    # Activations: the colour is right for most images, a blue is taken for green now and then.
    act = []
    for i, (iid, c, s) in enumerate(zip(ids, labels, shapes)):
        seen = 2 if (c == 1 and i % 4 == 1) else c
        for group, values, true in (("color", COLORS, COLORS[seen]), ("shape", SHAPES, s)):
            logits = np.array([25.0 if v == true else 20.0 for v in values]) + rng.normal(0, 0.5, len(values))
            soft = np.exp(logits - logits.max())
            soft /= soft.sum()
            act += [
                {"image_id": iid, "primitive": f"{group}:{v}", "logit": float(z), "activation": float(a)}
                for v, z, a in zip(values, logits, soft)
            ]
    _write(ws, "compmap_activations", act, vl_model=VL)
    w = []
    for model, noise in (("prim", 0.8), ("oracle", 0.1)):
        for c in range(3):
            for g, v in prims:
                own = g == "color" and v == COLORS[c]
                w.append(
                    {
                        "model": model,
                        "label": c,
                        "primitive": f"{g}:{v}",
                        "weight": float((2.0 if own else -0.5) + rng.normal(0, noise)),
                    }
                )
    _write(ws, "compmap_weights", w, vl_model=VL)
    scores = []
    for ways, shots, episodes, n in ((3, 1, 50, 45), (3, 0, 1, 12)):
        for model, value in (("prim", 0.8), ("interv_full", 0.7), ("interv_partial", 0.75), ("oracle", 1.0)):
            scores.append(
                {
                    "model": model,
                    "ways": ways,
                    "shots": shots,
                    "metric": "accuracy",
                    "value": value,
                    "lo": value - 0.05,
                    "hi": min(1.0, value + 0.05),
                    "episodes": episodes,
                    "n": n,
                }
            )
        scores.append(
            {
                "model": "prim",
                "ways": ways,
                "shots": shots,
                "metric": "delta",
                "value": 0.3,
                "lo": 0.25,
                "hi": 0.35,
                "episodes": episodes,
                "n": n,
            }
        )
        for model, value in (("prim", 2 / 3), ("oracle", 1.0)):
            for metric in ("acc_instance", "acc_class"):
                scores.append(
                    {
                        "model": model,
                        "ways": ways,
                        "shots": shots,
                        "metric": metric,
                        "value": value,
                        "lo": value - 0.1,
                        "hi": 1.0,
                        "episodes": episodes,
                        "n": 3,
                    }
                )
    _write(ws, "compmap_scores", scores, vl_model=VL)
