"""Tiny models and a tiny workspace for the model tests (no downloads, random weights)."""

from __future__ import annotations

import json
from pathlib import Path

import torch
import torch.nn as nn

N_IMAGES = 40


class TinyConv(nn.Module):
    """Like the demo's small conv encoder: conv blocks -> global pool -> linear."""

    def __init__(self, width: int = 8, dim: int = 12):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, width, 3, stride=2, padding=1),
            nn.BatchNorm2d(width),
            nn.ReLU(),
            nn.Conv2d(width, width * 2, 3, stride=2, padding=1),
            nn.ReLU(),
        )
        self.head = nn.Linear(width * 2, dim)

    def forward(self, x):
        return self.head(self.features(x).mean(dim=(2, 3)))


class TinyTokens(nn.Module):
    """Returns (B, T, C) tokens, to check token pooling."""

    def __init__(self):
        super().__init__()
        self.patch = nn.Conv2d(3, 6, 8, stride=8)

    def forward(self, x):
        return self.patch(x).flatten(2).transpose(1, 2)


def tiny_open_clip_config(path: Path, coca: bool = False) -> Path:
    """A tiny open_clip architecture (random weights) as a config JSON file."""
    cfg = {
        "embed_dim": 16,
        "vision_cfg": {"image_size": 32, "layers": 2, "width": 32, "patch_size": 8, "head_width": 16},
        "text_cfg": {"context_length": 16, "vocab_size": 1000, "width": 32, "heads": 2, "layers": 1},
    }
    if coca:
        # CoCa generates with the default tokenizer, whose special tokens need the full vocab;
        # image tokens feed the decoder's cross-attention, so embed_dim = decoder width.
        cfg["embed_dim"] = 32
        cfg["vision_cfg"].update({"attentional_pool": True, "attn_pooler_heads": 2, "output_tokens": True})
        cfg["text_cfg"].update({"vocab_size": 49408, "embed_cls": True, "output_tokens": True})
        cfg["multimodal_cfg"] = {
            "context_length": 16,
            "vocab_size": 49408,
            "width": 32,
            "heads": 2,
            "layers": 1,
            "attn_pooler_heads": 2,
        }
        cfg["custom_text"] = True
    path.write_text(json.dumps(cfg))
    return path


def save_torch_weights(path: Path, model: nn.Module, init_kwargs=None, preprocess=None) -> Path:
    blob = {"state_dict": model.state_dict()}
    if init_kwargs is not None:
        blob["init_kwargs"] = init_kwargs
    if preprocess is not None:
        blob["preprocess"] = preprocess
    torch.save(blob, path)
    return path


def tiny_git(path: Path) -> Path:
    """A tiny GIT captioner (random weights) with a 17-word BERT vocab, saved to `path`."""
    import transformers as T

    path.mkdir(parents=True, exist_ok=True)
    words = [
        "[PAD]",
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
    ] + "a red blue green circle square triangle small large on the left".split()
    (path / "vocab.txt").write_text("\n".join(words) + "\n")
    import inspect

    if "vocab_file" in inspect.signature(T.BertTokenizer.__init__).parameters:  # transformers 4
        tok = T.BertTokenizer(vocab_file=str(path / "vocab.txt"))
    else:
        tok = T.BertTokenizer(vocab={w: i for i, w in enumerate(words)})
    ip = T.CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    T.GitProcessor(image_processor=ip, tokenizer=tok).save_pretrained(path)
    cfg = T.GitConfig(
        vision_config=dict(
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=37,
            image_size=32,
            patch_size=8,
        ),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=37,
        vocab_size=len(words),
        max_position_embeddings=64,
        bos_token_id=2,
        eos_token_id=3,
        pad_token_id=0,
    )
    torch.manual_seed(0)  # random weights, but the same ones every run
    T.GitForCausalLM(cfg).save_pretrained(path)
    return path


def tiny_blip(path: Path) -> Path:
    """A tiny BLIP captioner (random weights), saved to `path`."""
    import transformers as T

    path.mkdir(parents=True, exist_ok=True)
    words = [
        "[PAD]",
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
        "[DEC]",
    ] + "a red blue green circle square triangle small large on the left".split()
    tok = T.BertTokenizer(vocab={w: i for i, w in enumerate(words)}, bos_token="[DEC]")
    T.BlipProcessor(
        image_processor=T.BlipImageProcessor(size={"height": 32, "width": 32}), tokenizer=tok
    ).save_pretrained(path)
    cfg = T.BlipConfig(
        vision_config=dict(
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=37,
            image_size=32,
            patch_size=8,
        ),
        text_config=dict(
            hidden_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=37,
            vocab_size=len(words),
            max_position_embeddings=32,
            bos_token_id=5,
            eos_token_id=3,
            pad_token_id=0,
            sep_token_id=3,
            encoder_hidden_size=32,
        ),
        projection_dim=16,
    )
    torch.manual_seed(0)
    T.BlipForConditionalGeneration(cfg).save_pretrained(path)
    return path
