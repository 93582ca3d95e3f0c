"""The chapter registry: one ordered list drives the sidebar, the URLs, previous/home/next
and the tests. Adding a chapter: content/en/<slug>.md, content/fr/<slug>.md, a page file
(chapter_pages/<slug, - as _>.py), and one entry here. Slugs and anchors are English in
both languages (DESIGN.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from calculator.core.messages import text
from calculator.training.setup import FINE_TUNING_DEFAULTS as TRAIN
from guide.case import Case
from guide.typography import for_language

ROOT = Path(__file__).resolve().parent.parent
CONTENT = ROOT / "content"


@dataclass(frozen=True)
class Chapter:
    slug: str  # URL path; "" for the home page
    icon: str
    anchors: tuple[str, ...] = ()  # section anchors promised to users (the public contract)
    case: tuple[str, ...] = ()  # the case fields its bar shows (guide/case.py), in order
    defaults: Case = field(default_factory=Case)  # the case before the reader sets anything

    @property
    def content_name(self) -> str:
        return self.slug or "home"

    @property
    def page(self) -> str:
        """The chapter's page file, relative to Home.py: chapter_pages/<slug, - as _>.py. Not
        pages/: a pages/ folder beside st.navigation shows "Page not found" on a first visit
        (streamlit/streamlit#8860)."""
        return f"chapter_pages/{self.content_name.replace('-', '_')}.py"

    def content_path(self, lang: str) -> Path:
        return CONTENT / lang / f"{self.content_name}.md"

    def title(self, lang: str) -> str:
        """The visible title (content/ui/<lang>/chapters.toml), with the language's typography
        (French: « … ? » spacing)."""
        return for_language(text(f"chapters.{self.content_name}", lang), lang)


HOME = Chapter(
    slug="",
    icon=":material/home:",
    anchors=("quick-check",),
    case=("model", "gpu", "dtype"),
    defaults=Case(model="llama-3.1-8b", gpu="rtx4090"),
)

# Reading order: the order of the table in DESIGN.md.
CHAPTERS: tuple[Chapter, ...] = (
    HOME,
    Chapter(
        slug="slow-model",
        icon=":material/speed:",
        anchors=("batch-size", "data-parallelism", "inference-code", "precision"),
        case=("model", "gpu", "dtype", "batch", "prompt", "new_tokens", "workload", "items"),
        defaults=Case(model="llama-3.1-8b", gpu="l4", batch=8, prompt=1024, new_tokens=256),
    ),
    Chapter(
        slug="memory-estimate",
        icon=":material/memory:",
        anchors=("rule-of-thumb", "exact-count", "inference-overhead", "units"),
        case=("model", "gpu", "dtype"),
        defaults=Case(model="llama-3.1-8b", gpu="rtx4090"),
    ),
    Chapter(
        slug="quantization",
        icon=":material/compress:",
        anchors=("precision-factor", "formats", "accuracy-tradeoff", "kept-modules"),
        case=("model", "gpu", "batch", "prompt", "new_tokens", "workload"),
        defaults=Case(model="llama-3.1-8b", gpu="rtx4090", batch=1, prompt=2048, new_tokens=512),
    ),
    Chapter(
        slug="parallelism",
        icon=":material/view_column:",
        anchors=("pipeline-parallelism", "pipeline-bubble", "tensor-parallelism", "data-parallelism"),
        case=("model", "gpu", "dtype", "batch", "prompt"),
        defaults=Case(model="llama-3.1-70b", gpu="a100-80gb", batch=1, prompt=2048),
    ),
    Chapter(
        slug="cpu-offloading",
        icon=":material/swap_horiz:",
        anchors=("device-map", "offload-cost", "zero-offload", "llama-cpp"),
        case=("model", "gpu", "dtype"),
        defaults=Case(model="llama-3.1-8b", gpu="t4"),
    ),
    Chapter(
        slug="oom",
        icon=":material/memory:",
        anchors=("oom-message", "context-length", "dummy-data-test", "batch-size", "sort-by-length"),
        case=("model", "gpu", "dtype", "batch", "prompt", "new_tokens", "workload"),
        defaults=Case(model="llama-3.1-8b", gpu="rtx4090", batch=4, prompt=4096, new_tokens=512),
    ),
    Chapter(
        slug="serving",
        icon=":material/dns:",
        anchors=("serving-memory", "published-logs", "concurrency", "how-many-gpus", "engine-settings",
                 "multi-gpu-inference"),
        case=("model", "gpu", "dtype", "users", "context", "tensor"),
        defaults=Case(model="llama-3.1-8b", gpu="h100", users=32, context=8192, tensor=1, dtype_as_shipped=True),
    ),
    Chapter(
        slug="fine-tuning",
        icon=":material/model_training:",
        anchors=("training-memory", "optimizer-states", "activations", "lora", "zero", "distributed", "accuracy"),
        case=("model", "gpu", "method", "precision", "optimizer", "checkpointing", "batch", "sequence"),
        # the training choices are the `train` command's defaults (calculator/training/setup.py)
        defaults=Case(model="llama-3.1-8b", gpu="a100-80gb", batch=TRAIN.micro_batch, sequence=TRAIN.sequence,
                      method=TRAIN.method, precision=TRAIN.precision, optimizer=TRAIN.optimizer,
                      checkpointing=TRAIN.checkpointing),
    ),
    Chapter(
        slug="estimator",
        icon=":material/calculate:",
        anchors=("estimate", "safetensors-count", "take-away", "accuracy", "limits"),
        case=("model", "gpu"),
        defaults=Case(model="llama-3.1-8b", gpu="rtx4090"),
    ),
)


def by_slug(slug: str) -> Chapter | None:
    return next((c for c in CHAPTERS if c.slug == slug), None)


def neighbours(slug: str) -> tuple[Chapter | None, Chapter | None]:
    """(previous, next) in reading order."""
    index = [c.slug for c in CHAPTERS].index(slug)
    previous = CHAPTERS[index - 1] if index > 0 else None
    following = CHAPTERS[index + 1] if index + 1 < len(CHAPTERS) else None
    return previous, following
