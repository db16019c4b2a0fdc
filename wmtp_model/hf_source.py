"""Where a model's config.json comes from: a file, a local model folder, or a Hugging Face repo id (read through
`huggingface_hub`, optional: imported only then; offline with HF_HUB_OFFLINE, from its cache), and the quantization
a ModelOpt checkpoint keeps beside it (hf_quant_config.json). `wmtp.hf_config` turns the document into a model row."""

from __future__ import annotations

import os
import re
from pathlib import Path

from wmtp.errors import ConfigError
from wmtp.quant_config import QUANT_KEYS

_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")


def looks_like_repo_id(text: str) -> bool:
    """`org/name` that is not a local path: a Hugging Face repo id."""
    t = str(text)
    return bool(_REPO_ID.match(t)) and ".." not in t and not t.endswith(".json") and not Path(t).exists()


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in ("1", "ON", "YES", "TRUE")


def hub_config_path(repo_id: str) -> Path:
    """The cached (or, online, downloaded) config.json of a Hugging Face repo, via huggingface_hub."""
    try:
        import huggingface_hub as hub
    except ImportError:
        raise ConfigError(f"{repo_id!r} is neither a local file nor a folder; reading a Hugging Face repo id needs "
                          "the huggingface_hub package (pip install huggingface_hub), or give a path to its "
                          "config.json") from None
    try:
        cached = hub.try_to_load_from_cache(repo_id, "config.json")
    except Exception:  # noqa: BLE001 - a malformed cache entry: fall through to the download's own error
        cached = None
    if isinstance(cached, (str, Path)) and Path(cached).is_file():
        return Path(cached)
    if _offline() or getattr(getattr(hub, "constants", None), "HF_HUB_OFFLINE", False):
        raise ConfigError(f"config.json of Hugging Face repo {repo_id!r} is not in the local cache and HF_HUB_OFFLINE "
                          "is set: download it once online, or give a path to the file")
    try:
        return Path(hub.hf_hub_download(repo_id, "config.json", etag_timeout=10))
    except Exception as e:  # noqa: BLE001 - network, auth, missing repo: one line, not a traceback
        detail = (str(e).strip().splitlines() or [""])[0][:160]
        raise ConfigError(f"cannot fetch config.json of Hugging Face repo {repo_id!r} (not cached, and "
                          f"{type(e).__name__}{': ' + detail if detail else ''})") from None


def resolve_config_path(source: str | Path) -> tuple[Path, str | None]:
    """(config.json path, default key) for a config file, a model folder or a Hugging Face repo id."""
    if source is None or str(source).strip() == "":
        raise ConfigError("the model is empty: give --model KEY or --config (a config.json, a model folder or a "
                          "Hugging Face repo id)")
    from wmtp.fileio import check_lookup

    check_lookup(source, "config", ConfigError)
    p = Path(source)
    if p.is_dir():
        cfg = p / "config.json"
        if not cfg.is_file():
            raise ConfigError(f"model folder {p} has no config.json")
        return cfg, p.resolve().name or None
    if not p.exists() and looks_like_repo_id(str(source)):
        return hub_config_path(str(source)), str(source).split("/", 1)[1]
    return p, None


def with_modelopt_sidecar(cfg, p: Path) -> tuple[object, str | None]:
    """A ModelOpt unified checkpoint keeps its quantization in hf_quant_config.json beside config.json (vLLM and
    SGLang read it there): without it, an NVFP4 checkpoint was priced as bf16. config.json's own
    quantization_config, where it has one, wins."""
    from wmtp.fileio import read_json

    side = p.parent / "hf_quant_config.json"
    text = cfg.get("text_config") if isinstance(cfg, dict) else None
    # a null quantization_config is none (as vLLM reads it): the sidecar was skipped and NVFP4 priced as bf16
    if (not isinstance(cfg, dict) or any(cfg.get(k) is not None for k in QUANT_KEYS)
            or (isinstance(text, dict) and any(text.get(k) is not None for k in QUANT_KEYS)) or not side.is_file()):
        return cfg, None
    doc = read_json(side, "ModelOpt quantization config", ConfigError)
    quant = doc.get("quantization") if isinstance(doc, dict) else None
    if not isinstance(quant, dict):
        raise ConfigError(f"{side}: no quantization object (ModelOpt's hf_quant_config.json holds one with quant_algo)")
    return {**cfg, "quantization_config": {"quant_method": "modelopt", **quant}}, str(side)
