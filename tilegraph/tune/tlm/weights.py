"""The shipped model: weights, how they were made, and the checks on load.

    net, meta = load_model()                 # tilegraph/tune/tlm/weights/tlm.pt + tlm.json
    save_model(net, meta, directory)         # what `python -m tilegraph.tlm.train` writes

tlm.json records the format and language versions, the vocabulary's digest, the network's
config, the command and seed that trained it, the dataset it saw and its held-out metrics. A
file from another format or vocabulary is refused with one line saying so (a model silently
reading another vocabulary would write nonsense); a model of an earlier version of this
vocabulary (a prefix of it) loads with the new tokens' rows grown (`grow_vocabulary`). Weights
are stored in float16 (half the size) and loaded as float32.
"""

from __future__ import annotations

import json
import pickle
from dataclasses import replace
from pathlib import Path
from typing import Any

from tilegraph.tune.tlm.language import LANGUAGE_VERSION, VOCAB, LanguageError
from tilegraph.tune.tlm.network import ModelConfig, ScheduleLM, torch

FORMAT_VERSION = 1
WEIGHTS_DIR = Path(__file__).parent / "weights"
WEIGHTS_FILE, META_FILE = "tlm.pt", "tlm.json"


def save_model(net: ScheduleLM, meta: dict[str, Any], directory: str | Path = WEIGHTS_DIR) -> Path:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().to(torch.float16) if v.is_floating_point() else v for k, v in net.state_dict().items()}
    torch.save(state, directory / WEIGHTS_FILE)
    full = {"format_version": FORMAT_VERSION, "language_version": LANGUAGE_VERSION, "vocabulary": VOCAB.digest,
            "config": net.cfg.to_dict(), "parameters": net.parameter_count(), **meta}
    (directory / META_FILE).write_text(json.dumps(full, indent=2, sort_keys=True) + "\n")
    return directory


def read_meta(directory: str | Path = WEIGHTS_DIR) -> dict[str, Any]:
    path = Path(directory) / META_FILE
    try:
        meta = json.loads(path.read_text())
    except FileNotFoundError:
        raise LanguageError(f"no TLM model at {path.parent} (train one: python -m tilegraph.tlm.train)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise LanguageError(f"{path} is not a TLM model description ({err})") from None
    language = meta.get("language_version")
    if meta.get("format_version") != FORMAT_VERSION or not isinstance(language, int) \
            or not 1 <= language <= LANGUAGE_VERSION:
        raise LanguageError(f"the TLM model at {path.parent} is format {meta.get('format_version')} / language "
                            f"{language}; this tilegraph reads format {FORMAT_VERSION} / language "
                            f"1..{LANGUAGE_VERSION}: retrain it (python -m tilegraph.tlm.train)")
    size = meta.get("config", {}).get("vocab") if isinstance(meta.get("config"), dict) else None
    if not isinstance(size, int) or not 0 < size <= len(VOCAB) or meta.get("vocabulary") != VOCAB.prefix_digest(size):
        raise LanguageError(f"the TLM model at {path.parent} was trained on another vocabulary "
                            f"({meta.get('vocabulary')} is not this vocabulary, {VOCAB.digest}, nor an earlier "
                            "version of it): retrain it (python -m tilegraph.tlm.train)")
    return meta


def grow_vocabulary(net: ScheduleLM) -> ScheduleLM:
    """The model with an embedding row for every token the vocabulary gained since it was trained.

    The vocabulary only grows at its end, so the old rows keep their ids. A new token starts as the
    mean of the rows of its kind (`sketch:gpu_flat` as the mean of the other sketch tokens), the
    closest thing the model knows, until training on sentences that use it moves it.
    """
    old = net.cfg.vocab
    if old == len(VOCAB):
        return net
    grown = ScheduleLM(replace(net.cfg, vocab=len(VOCAB)))
    state = net.state_dict()
    weight = state["embed.weight"]
    rows = [weight]
    for token in VOCAB.tokens[old:]:
        kind = token.split(":", 1)[0] + ":" if ":" in token else None
        same = [i for i, t in enumerate(VOCAB.tokens[:old]) if kind and t.startswith(kind)]
        rows.append(weight[same].mean(dim=0, keepdim=True) if same else weight.mean(dim=0, keepdim=True))
    state["embed.weight"] = torch.cat(rows)
    grown.load_state_dict(state)
    return grown


def load_model(directory: str | Path = WEIGHTS_DIR) -> tuple[ScheduleLM, dict[str, Any]]:
    """The model and its description; LanguageError when it is missing, corrupt or of another version."""
    meta = read_meta(directory)
    net = ScheduleLM(ModelConfig(**meta["config"]))
    path = Path(directory) / WEIGHTS_FILE
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
        net.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in state.items()})
        net = grow_vocabulary(net)
    except FileNotFoundError:
        raise LanguageError(f"the TLM model description at {path.parent} has no weights file {WEIGHTS_FILE}") from None
    except (RuntimeError, KeyError, ValueError, EOFError, OSError, pickle.UnpicklingError) as err:
        raise LanguageError(f"cannot load the TLM weights {path}: {str(err).splitlines()[0][:160]}") from None
    return net.eval(), meta


__all__ = ["FORMAT_VERSION", "WEIGHTS_DIR", "grow_vocabulary", "load_model", "read_meta", "save_model"]
