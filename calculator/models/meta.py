"""Exact counts: build a transformers model on PyTorch's meta device and size it.

No weight is allocated or downloaded, so a 400B-parameter model is counted on a laptop in a
fraction of a second. torch and transformers are imported here only, on first use.
"""

from __future__ import annotations

from collections import defaultdict
import logging
import re
import warnings

from calculator.models.architecture import ArchSpec
from calculator.models.configs import check_config, without_runtime_keys
from calculator.core.errors import CalculatorError
from calculator.models.families import EXPERT_TOPK_KEYS, first_positive
from calculator.models.library_reasons import transformers_reason
from calculator.models.summary import Linear, ModelSummary, Unit, in_tower

MODEL_CLASSES = ("auto", "base")
_NORM_CLASS = re.compile(r"norm", re.IGNORECASE)


def known_model_types() -> frozenset[str]:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    return frozenset(CONFIG_MAPPING_NAMES)


def needs_remote_code(config: dict) -> bool:
    """True when transformers has no class of its own for this config's model_type."""
    return config.get("model_type") not in known_model_types()


def make_config(config: dict, trust_remote_code: bool = False, source_dir: str | None = None):
    """A transformers config object from a checked dict, without the keys that choose code
    at load time (an attention implementation may name a kernel repository on the Hub)."""
    check_config(config)
    config = without_runtime_keys(config)
    model_type = config["model_type"]
    if needs_remote_code(config):
        if not config.get("auto_map"):
            raise CalculatorError("unknown_model_type", model_type=model_type[:60])
        if not trust_remote_code or source_dir is None:
            raise CalculatorError("needs_remote_code", model_type=model_type[:60])
        return _remote_config(config, source_dir)
    from transformers import CONFIG_MAPPING

    try:
        with _quiet():
            return CONFIG_MAPPING[model_type].from_dict(dict(config))
    except Exception as exc:  # transformers validates fields with several exception types
        raise CalculatorError("invalid_config", detail=transformers_reason(exc, config)) from None


def _remote_config(config: dict, source_dir: str):
    """The config class of the folder's own code, made from the config given (the file the
    reader named, checked above), not from whatever config.json sits beside it."""
    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    reference = (config.get("auto_map") or {}).get("AutoConfig")
    if not isinstance(reference, str) or "--" in reference:  # "repo--module.Class" would fetch another repo
        raise CalculatorError("needs_remote_code", model_type=str(config["model_type"])[:60])
    try:
        with _quiet():
            made = get_class_from_dynamic_module(reference, source_dir, local_files_only=True).from_dict(dict(config))
        made.name_or_path = source_dir  # where from_config finds the model's code
        return made
    except CalculatorError:
        raise
    except Exception as exc:  # the folder's code, failing its own way
        raise CalculatorError("invalid_config", detail=transformers_reason(exc, config)) from None


def model_constructor(config, model_class: str, trust_remote_code: bool = False):
    """The callable that builds the requested model class from a config."""
    import transformers
    from transformers import AutoModel, PreTrainedModel

    if model_class not in MODEL_CLASSES:
        raise CalculatorError("unknown_model_class", value=str(model_class)[:40], choices=", ".join(MODEL_CLASSES))
    auto_map = getattr(config, "auto_map", None) or {}
    if trust_remote_code and auto_map:
        name = "AutoModel"
        if model_class == "auto":
            name = next((key for key in auto_map if key.startswith("AutoModelFor")), "AutoModel")
        auto_cls = getattr(transformers, name)
        return lambda cfg, dtype: auto_cls.from_config(cfg, dtype=dtype, trust_remote_code=True)
    if model_class == "base":
        return lambda cfg, dtype: AutoModel.from_config(cfg, dtype=dtype)
    architectures = getattr(config, "architectures", None) or []
    if not architectures:
        return lambda cfg, dtype: AutoModel.from_config(cfg, dtype=dtype)
    name = str(architectures[0])
    cls = getattr(transformers, name, None) if name.isidentifier() else None
    if not (isinstance(cls, type) and issubclass(cls, PreTrainedModel)):
        raise CalculatorError("unknown_architecture", architecture=name[:80])
    return lambda cfg, dtype: cls._from_config(cfg, dtype=dtype)


def build_empty_model(config, model_class: str = "auto", trust_remote_code: bool = False):
    """The model with every tensor on the meta device, in float16.

    Building under `torch.device("meta")` ties shared weights as transformers does when it
    loads a checkpoint (accelerate's init_empty_weights leaves them untied in transformers 5).
    Float16 lets us tell the buffers that follow the model's dtype from those with their own.
    """
    import torch

    construct = model_constructor(config, model_class, trust_remote_code)
    try:
        with _quiet(), torch.device("meta"):
            return construct(config, torch.float16)
    except CalculatorError:
        raise
    except Exception as exc:
        raise CalculatorError("build_failed", architecture=_class_label(config, model_class),
                              detail=transformers_reason(exc, config)) from None


def summarize(model, config, model_class: str) -> ModelSummary:
    """Parameters (shared tensors once), buffers, accelerate-style units, groups, MoE actives."""
    import torch

    param_sizes: dict[str, int] = defaultdict(int)
    fixed_sizes: dict[str, int] = defaultdict(int)
    scaled_sizes: dict[str, int] = defaultdict(int)
    parameters = trainable = 0
    for name, param in model.named_parameters():  # named_parameters() yields a shared tensor once
        parameters += param.numel()
        trainable += param.numel() if param.requires_grad else 0
        _add_to_prefixes(param_sizes, name, param.numel())
    for name, buffer in model.named_buffers():
        if buffer.dtype == torch.float16:
            _add_to_prefixes(scaled_sizes, name, buffer.numel())
        else:
            _add_to_prefixes(fixed_sizes, name, buffer.numel() * buffer.element_size())

    no_split = tuple(sorted(getattr(model, "_no_split_modules", None) or ()))
    units = tuple(
        Unit(name, param_sizes[name], fixed_sizes[name], scaled_sizes[name])
        for name in _unit_names(model, no_split)
        if param_sizes[name] or fixed_sizes[name] or scaled_sizes[name]
    )
    return ModelSummary(
        architecture=type(model).__name__,
        model_type=str(getattr(config, "model_type", "")),
        model_class=model_class,
        parameters=parameters,
        trainable_parameters=trainable,
        active_parameters=_active_parameters(model, config, parameters),
        fixed_buffer_bytes=fixed_sizes[""],
        scaled_buffer_elements=scaled_sizes[""],
        units=units,
        groups=_parameter_groups(model),
        no_split_modules=no_split,
        linears=_linears(model),
    )


def count(config: dict, model_class: str = "auto", trust_remote_code: bool = False,
          source_dir: str | None = None) -> tuple[ModelSummary, ArchSpec]:
    """The exact summary and the shape of a config dict: check it, make the transformers
    config object once, build the model on the meta device, count it."""
    cfg = make_config(config, trust_remote_code=trust_remote_code, source_dir=source_dir)
    return count_object(cfg, model_class, trust_remote_code)


def count_config(config: dict, model_class: str = "auto") -> ModelSummary:
    """The exact summary of a config dict (never runs remote code)."""
    return count(config, model_class)[0]


def count_object(cfg, model_class: str = "auto", trust_remote_code: bool = False) -> tuple[ModelSummary, ArchSpec]:
    """Summary and shape of a transformers config object (one made by make_config, or by
    transformers itself from a repository's own code)."""
    from calculator.models.architecture import spec_from_config

    model = build_empty_model(cfg, model_class, trust_remote_code)
    return summarize(model, cfg, model_class), spec_from_config(cfg)


def hub_remote_config(repo_id: str):
    """CLI only, with --trust-remote-code: the config object transformers makes with the
    repository's own code. Absurd sizes are refused before any code runs."""
    from transformers import AutoConfig

    from calculator.models.hub import check_hub_id, fetch_config

    check_config(fetch_config(repo_id))
    try:
        with _quiet():
            return AutoConfig.from_pretrained(check_hub_id(repo_id), trust_remote_code=True)
    except Exception as exc:
        raise CalculatorError("invalid_config", detail=transformers_reason(exc)) from None


def _add_to_prefixes(sizes: dict[str, int], name: str, value: int) -> None:
    parts = name.split(".")
    for end in range(len(parts) + 1):
        sizes[".".join(parts[:end])] += value


def _unit_names(model, no_split: tuple[str, ...]) -> list[str]:
    """accelerate's traversal (get_max_layer_size): descend into modules until a leaf or a
    no-split module; tensors held directly by the root count as units too."""
    names = [name for name, _ in model.named_parameters(recurse=False)]
    todo = list(model.named_children())
    found: list[str] = []
    while todo:
        name, module = todo.pop(0)
        children = list(module.named_children())
        if not children or type(module).__name__ in no_split:
            found.append(name)
        else:
            todo = [(f"{name}.{child}", sub) for child, sub in children] + todo
    names += found
    names += [name for name, _ in model.named_buffers(recurse=False)]
    return names


def _head_weight_ids(model) -> set[int]:
    """The id of the output head's weight (empty when the model has no head, or will not say)."""
    try:
        head = model.get_output_embeddings()
        weight = getattr(head, "weight", None) if head is not None else None
    except (AttributeError, NotImplementedError, TypeError):
        return set()
    return {id(weight)} if weight is not None else set()


def _parameter_groups(model) -> dict[str, int]:
    """Parameters by what they are: what a quantization format converts and what it keeps."""
    import torch

    head_ids = _head_weight_ids(model)
    groups = dict.fromkeys(("linear", "experts", "embedding", "head", "norm", "bias", "other"), 0)
    seen: set[int] = set()
    for module_name, module in model.named_modules():
        for pname, param in module.named_parameters(recurse=False):
            if id(param) in seen:
                continue
            seen.add(id(param))
            full = f"{module_name}.{pname}" if module_name else pname
            groups[_group_of(full, pname, param, module, head_ids, torch)] += param.numel()
    return groups


def _linears(model) -> tuple[Linear, ...]:
    """Every weight matrix of the model, grouped by (module name, in, out), in model order.
    nn.Linear stores [out, in]; GPT-2's Conv1D stores [in, out]; fused experts store
    [experts, out, in]. Shared matrices count once; an output head tied to the input
    embeddings is listed as kind "tied-head" (its weights are the embedding's)."""
    import torch

    head_ids = _head_weight_ids(model)
    found: dict[tuple, list] = {}
    seen: set[int] = set()
    embeddings = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
    for module_name, module in model.named_modules():
        if isinstance(module, torch.nn.Embedding) or _NORM_CLASS.search(type(module).__name__):
            continue
        for pname, param in module.named_parameters(recurse=False):
            full = f"{module_name}.{pname}" if module_name else pname
            matrix = param.dim() == 2 or (param.dim() == 3 and _is_expert(full))
            if id(param) in seen or not matrix or pname == "bias" or pname.endswith("_bias"):
                continue
            seen.add(id(param))
            if param.dim() == 3:
                count, out_f, in_f = param.shape
                name, kind = pname, "experts"
            else:
                out_f, in_f = param.shape
                if type(module).__name__ == "Conv1D":
                    in_f, out_f = param.shape
                count = 1
                name = module_name.split(".")[-1] or pname
                kind = "head" if id(param) in head_ids else ("experts" if _is_expert(full) else "linear")
                if id(param) in embeddings:
                    kind = "tied-head"
            key = (name, int(in_f), int(out_f), kind, in_tower(module_name))
            found.setdefault(key, [0])[0] += int(count)
    return tuple(Linear(name, i, o, n[0], kind, tower) for (name, i, o, kind, tower), n in found.items())


def _group_of(full: str, pname: str, param, module, head_ids: set[int], torch) -> str:
    if _is_expert(full) and not pname.endswith("_bias"):  # gpt-oss's expert biases stay 16-bit
        return "experts"
    if isinstance(module, torch.nn.Embedding):
        return "embedding"
    if id(param) in head_ids:
        return "head"
    if _NORM_CLASS.search(type(module).__name__):
        return "norm"
    if pname == "bias" or pname.endswith("_bias"):
        return "bias"
    if param.dim() == 2:
        return "linear"  # nn.Linear, GPT-2's Conv1D, fused projections: matrices
    return "other"


def _is_expert(name: str) -> bool:
    return "experts" in name.split(".")


def _config_value(config, keys: tuple[str, ...]):
    """The first positive value of `keys` in the config, else in its text sub-config."""
    text = getattr(config, "text_config", None)
    return first_positive(config, keys) or (first_positive(text, keys) if text is not None else None)


def _active_parameters(model, config, parameters: int) -> int | None:
    """Parameters a token goes through in a mixture-of-experts model: everything but the
    routed experts, plus top-k of each layer's experts. None for a dense model."""
    top_k = _config_value(config, EXPERT_TOPK_KEYS)
    groups: dict[str, list] = defaultdict(list)
    for name, param in model.named_parameters():
        parts = name.split(".")
        if "experts" in parts:
            cut = parts.index("experts") + 1
            groups[".".join(parts[:cut])].append((parts[cut:], param))
    if not groups or top_k is None:
        return None
    routed = active = 0
    for members in groups.values():
        total = sum(p.numel() for _, p in members)
        indices = {rest[0] for rest, _ in members if rest and rest[0].isdigit()}
        if indices:
            experts = len(indices)  # a ModuleList of experts
        else:
            experts = max(p.shape[0] for _, p in members if p.dim() == 3) if any(p.dim() == 3 for _, p in members) else 0
        if experts <= 0:
            return None
        routed += total
        active += total * min(top_k, experts) // experts
    return parameters - routed + active


def _class_label(config, model_class: str) -> str:
    if model_class == "base":
        return "AutoModel"
    architectures = getattr(config, "architectures", None) or ["AutoModel"]
    return str(architectures[0])[:80]


class _quiet:
    """Silence transformers' warnings and logs while building: the user asked for numbers."""

    def __enter__(self):
        self._warnings = warnings.catch_warnings()
        self._warnings.__enter__()
        warnings.simplefilter("ignore")
        self._logger = logging.getLogger("transformers")
        self._level = self._logger.level
        self._logger.setLevel(logging.ERROR)
        return self

    def __exit__(self, *exc):
        self._logger.setLevel(self._level)
        self._warnings.__exit__(*exc)
        return False
