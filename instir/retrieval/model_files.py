"""What a model says of itself, remembered under its files: a rerun whose runs and vectors exist
learns a model's fingerprint and settings from one small record instead of loading the model (for a
7B model, minutes and a GPU's memory spent to find that nothing is left to compute).

A description (what a retriever records and keys its caches on once the model is loaded: the
weights' fingerprint, the sequence length, the modules …) is kept in the kit's verified store
(:mod:`instir.verified_store`) under ``<cache>/model-descriptions``, keyed by the model folders'
files (each file's path, size, modification and change time), the retriever's options that change the
description, and the versions of the libraries that load the model. Any change to those (a file
rewritten, an option, an upgraded library) misses the record and the model is loaded and described
again, as it was before the record existed; a damaged record is removed with a warning and rebuilt.

A model whose files are not on disk under a name that stays put is always loaded: a Hugging Face id
is looked up in the local cache only when the hub is offline or the revision is a commit (online, a
branch may have moved, and the loader would fetch its newest files).
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from instir import atomic
from instir.errors import UsageError
from instir.extras import package_versions
from instir.inputs import expanded, file_problem
from instir.stamps import json_sha256
from instir.verified_store import Damaged, Entry, VerifiedStore

#: The folder under a retriever's cache root that holds the descriptions.
FOLDER = "model-descriptions"
RECORD = "description.json"
#: The libraries whose versions are part of every description's key (they load and run the models).
LIBRARIES = ("sentence-transformers", "transformers", "torch", "peft")
_COMMIT = re.compile(r"[0-9a-f]{40}")

#: what a local model folder must hold for each adapter (any one of the names); others: ``config.json``
LOCAL_CONFIG_FILES = {"sentence-transformers": ("modules.json", "config.json"),
                      "peft-decoder": ("adapter_config.json", "config.json")}
#: suffixes of weight files (``model.safetensors``, ``pytorch_model.bin``, shards and their index, LoRA adapters …)
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".h5", ".msgpack", ".ckpt", ".index.json")


def local_model_problem(model: str, adapter: str, *, base: bool = False) -> str | None:
    """Why ``model`` (a card's ``model``, or its ``base_model`` when ``base``) cannot be loaded from
    the local folder it names (``not found``, ``a file, not a model folder``, ``a folder without
    config.json (not a hf-mean-pool model)``, ``config.json but no weights …``); None when it is a
    folder holding the config the adapter reads (:data:`LOCAL_CONFIG_FILES`) and weights, or no
    local path at all (a Hugging Face id: :func:`instir.systems.registry.system_status` looks in the cache
    for those). A name starting with ``/``, ``./``, ``../`` or ``~``, or one that exists on disk, is a local
    path."""
    if not model:
        return None
    path = expanded(model)
    if not is_local_path(model):
        return None
    problem = file_problem(path)
    if problem is None:
        return "a file, not a model folder"
    if not problem.startswith("is a directory"):
        return problem.removeprefix("is ")
    configs = ("config.json",) if base else LOCAL_CONFIG_FILES.get(adapter, ("config.json",))
    found = next((name for name in configs if (path / name).is_file()), None)
    if found is None:
        return f"a folder without {' or '.join(configs)} (not a {adapter or 'Hugging Face'} model)"
    if found != "modules.json" and not any(p.name.endswith(WEIGHT_SUFFIXES) for p in path.iterdir() if p.is_file()):
        return f"a folder with {found} but no weights (model.safetensors, pytorch_model.bin, …)"
    return None


def is_local_path(model: str) -> bool:
    """Whether a model names a local path (see :func:`local_model_problem`), not a Hugging Face id."""
    return model.startswith(("/", "./", "../", "~")) or os.path.lexists(expanded(model))


def model_name_problem(model: str) -> str | None:
    """Why ``model`` is neither a local path nor a Hugging Face id (``name`` or ``org/name``); None when it is
    one. What the value is, not what the machine holds (:func:`local_model_problem` looks in a folder)."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        if model and not is_local_path(model):
            validate_repo_id(model)
    except HFValidationError:
        return "neither a local folder nor a Hugging Face id (name or org/name: letters, digits, '-', '_', '.')"
    return None


def hub_command(*words: str) -> str:
    """The Hugging Face command line that does ``words`` (``download ID``, ``login``) with the installed
    huggingface_hub: ``hf`` from 0.34 on (1.0 removed ``huggingface-cli``; its login is ``hf auth login``),
    else ``huggingface-cli``."""
    from importlib.metadata import version

    major, minor = (int(part) for part in re.findall(r"\d+", version("huggingface_hub"))[:2])
    if (major, minor) < (0, 34):
        return " ".join(("huggingface-cli", *words))
    return " ".join(("hf", *(("auth", *words) if words[:1] == ("login",) else words)))


def check_model(model: str | None, adapter: str = "", what: str = "model") -> None:
    """Refuse in one line a ``model`` that is no Hugging Face id (:func:`model_name_problem`), a local folder
    that cannot be what ``adapter`` loads (:func:`local_model_problem`), or weights neither in the Hugging Face
    cache nor downloadable (offline), before the library tries: it answers an empty folder with a traceback, a
    name holding an escape sequence after a try at the Hub, and missing weights after a minute of retries."""
    why = model_name_problem(model or "") or local_model_problem(model or "", adapter)
    if why:
        raise UsageError(f"{what} {model}: {why}")
    if model and not weights_present(model) and not hub_reachable():
        raise UsageError(f"{what} {model} is not in the Hugging Face cache and the Hub cannot be reached (offline): "
                         f"run `{hub_command('download', model)}` where there is network, or point HF_HOME at a "
                         "cache that holds it")


def _offline() -> bool:
    """Whether the Hugging Face Hub is offline, read as ``huggingface_hub.constants`` reads it
    (``HF_HUB_OFFLINE``, else ``TRANSFORMERS_OFFLINE``, one of 1/ON/YES/TRUE in any case, not stripped):
    the hub's own flag, fixed when it was imported (its downloads obey it), or the environment now (set
    after that import, as a notebook or a test may)."""
    from huggingface_hub import constants

    value = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE") or ""
    return bool(constants.HF_HUB_OFFLINE) or value.upper() in constants.ENV_VARS_TRUE_VALUES


@functools.cache
def hub_reachable(timeout_s: float = 3.0) -> bool:
    """Whether weights can be downloaded now: not when the Hub is offline (:func:`_offline`), nor when
    its host (``HF_ENDPOINT``) takes no connection within ``timeout_s``
    (:func:`~instir.http_retry.unreachable`); asked once per process."""
    from huggingface_hub import constants

    from instir.http_retry import unreachable  # httpx: imported only when the Hub is asked

    return not _offline() and unreachable(constants.ENDPOINT, timeout_s) is None


def weights_present(model: str, revision: str = "") -> bool:
    """A local directory, or a Hugging Face cache snapshot holding the repo's config."""
    if not model:
        return True
    if expanded(model).is_dir():
        return True
    from huggingface_hub import try_to_load_from_cache

    for filename in ("config.json", "adapter_config.json", "modules.json"):
        try:
            hit = try_to_load_from_cache(model, filename, revision=revision or None)
        except Exception:  # noqa: BLE001 - a malformed id is simply not present
            return False
        if isinstance(hit, str):
            return True
    return False



def model_folder(model: str, revision: str | None = None, *, download: bool = False) -> Path | None:
    """The local folder of ``model``'s files, without loading the model: ``model`` itself when it is a
    folder; else, for a Hugging Face id, its snapshot at ``revision``: with ``download``, fetched as the
    hub has it now (errors raise); without, from the local cache only and only when the hub is offline or
    ``revision`` is a commit. None when there is no such folder (the model must be loaded to be described)."""
    path = expanded(model)
    if path.is_dir():
        return path
    from huggingface_hub import snapshot_download

    if download:
        return Path(snapshot_download(model, revision=revision or None))
    if not (_offline() or (revision and _COMMIT.fullmatch(revision))) or model.count("/") != 1:
        return None
    try:
        return Path(snapshot_download(model, revision=revision or None, local_files_only=True))
    except Exception:  # noqa: BLE001 - not in the local cache (the hub raises several kinds): load it
        return None


def files_stamp(folder: Path) -> list[list]:
    """Every file under ``folder`` (links to files followed, a linked folder not walked, hidden names left
    out): its relative path, size and modification and change times in nanoseconds (the change time no one
    can set back), sorted."""
    stamp = []
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if any(part.startswith(".") for part in relative.parts) or not path.is_file():
            continue
        stat = path.stat()
        stamp.append([relative.as_posix(), stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns])
    return stamp


def remembered(cache_root: str | Path, folders: Sequence[Path | None], options: dict,
               describe: Callable[[], dict]) -> dict:
    """``describe()`` (which loads the models and says what they are), remembered under
    ``cache_root``: keyed by the files of the models' ``folders`` (:func:`model_folder`), ``options``
    (JSON: whatever else changes the description) and the versions of :data:`LIBRARIES`. When a folder is
    None (a model not on disk), ``describe()`` runs every time and nothing is kept."""
    if any(folder is None for folder in folders):
        return describe()
    identity = {"models": [[str(folder.resolve()), files_stamp(folder)] for folder in folders if folder is not None],
                "options": options, "libraries": package_versions(LIBRARIES)}
    key = json_sha256(identity)
    store = VerifiedStore(Path(cache_root) / FOLDER, "model description cache")
    name = key[:32]
    found = store.read(name, key, _read_record, required=(RECORD,))
    if found is not None:
        return found
    described = json.loads(json.dumps(describe(), sort_keys=True, default=str))
    store.put(name, key, lambda folder: atomic.write_text(folder / RECORD, json.dumps(described, sort_keys=True)),
              description=identity)
    return described


def _read_record(entry: Entry) -> dict:
    """The description a verified entry holds (a JSON object)."""
    path = entry.path / RECORD
    described = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(described, dict):
        raise Damaged(path, "does not hold a description (a JSON object)")
    return described
