"""The run config of ``scalerl train`` and of the worker's engine: one pydantic document, validated once at the edge.

Torch-free: validating a config (the service, the worker's Celery process) never imports torch; torch is imported
only where models are built (``rl_core.models.build``).

Every section forbids unknown keys. ``recipe`` accepts a preset name (``scalerl``), a mapping with an optional
``preset`` key plus overrides, or a path to a recipe YAML (``rl_core.recipe.load_recipe``); ``model`` is a
``rl_core.models.ModelConfig`` and ``task`` a ``rl_core.tasks.TaskConfig``. After ``load_run_config`` nothing
downstream re-validates: the engine trusts the typed object.

Example (``configs/demo.yaml``)::

    name: demo
    seed: 0
    recipe: {preset: scalerl, batch: {prompts: 8, generations: 8}}
    model: {preset: tiny}
    task: {kind: synthetic-addition, digits_max: 2}
    budget: {steps: 200}
    eval: {every: 10, k: 4}
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from rl_core.contracts.model_config import ModelConfig, SFTConfig
from rl_core.contracts.vllm_options import VLLMOptions
from rl_core.recipe.errors import RecipeError
from rl_core.recipe.io import load_recipe
from rl_core.recipe.model import Recipe
from rl_core.tasks.config import TaskConfig


class ConfigError(ValueError):
    """The run config is missing, unreadable or invalid; the message lists every problem on one line."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BudgetConfig(_Section):
    """When the run ends: after ``steps`` trainer steps, or earlier when a compute or wall-clock cap is hit."""

    steps: Annotated[int, Field(ge=1)]
    max_device_hours: Annotated[float | None, Field(gt=0)] = None
    max_minutes: Annotated[float | None, Field(gt=0)] = None


class EvalConfig(_Section):
    """Held-out evaluation: mean@k pass rate on ``prompts`` validation problems (all when None) every ``every``
    steps, at step 0 and at the last step. ``temperature`` None uses the recipe's sampling temperature."""

    every: Annotated[int, Field(ge=1)] = 10
    k: Annotated[int, Field(ge=1)] = 4
    prompts: Annotated[int | None, Field(ge=1)] = None
    split: Literal["train", "validation"] = "validation"
    temperature: Annotated[float | None, Field(gt=0)] = None


class CheckpointConfig(_Section):
    """Checkpoint every ``every`` steps (and at the end); keep the newest ``keep``."""

    every: Annotated[int, Field(ge=1)] = 20
    keep: Annotated[int, Field(ge=1)] = 2


class TrainerConfig(_Section):
    """Trainer backend. ``micro_batch_size`` rows per forward/backward (None: the whole batch at once).
    ``ranks`` data-parallel DeepSpeed ranks (one per GPU from the run's ``device`` upwards: ``device: cuda:1``
    with 3 ranks trains on GPUs 1-3); their collectives give up after ``collective_timeout_s``.
    ``length_buckets`` (torch backend): micro-batches cut by length and trimmed of padding
    (``rl_core.engine.length_buckets``), at most ``micro_batch_size`` rows each; the loss is the same."""

    backend: Literal["torch", "deepspeed"] = "torch"
    zero_stage: Annotated[int, Field(ge=0, le=3)] = 0
    micro_batch_size: Annotated[int | None, Field(ge=1)] = None
    length_buckets: bool = True
    ranks: Annotated[int, Field(ge=1, le=1024)] = 1
    collective_timeout_s: Annotated[float, Field(gt=0)] = 1800.0


def _check_device(value: str, what: str) -> str:
    if value != "cpu" and value != "cuda" and not value.startswith("cuda:"):
        raise ValueError(f"{what} must be 'cpu', 'cuda' or 'cuda:N', got {value!r}")
    if value.startswith("cuda:") and not value[5:].isdigit():
        raise ValueError(f"{what}: the N of 'cuda:N' must be a GPU index, got {value!r}")
    return value


def device_sequence(device: str, count: int) -> list[str]:
    """``count`` devices from ``device`` upwards: all ``cpu`` on the CPU, ``cuda:i``, ``cuda:i+1``, ... on GPUs."""
    if device == "cpu":
        return ["cpu"] * count
    index = int(device[5:]) if device.startswith("cuda:") else 0
    return [f"cuda:{index + i}" for i in range(count)]


class GeneratorConfig(_Section):
    """Generation: ``max_new_tokens`` caps responses (the recipe's length controller also applies). ``device``
    is the generator's device (None: the run's ``device``, i.e. colocated with the trainer); ``processes``
    generator processes take orders from one queue, on ``device`` upwards (``cuda:2`` with 3: GPUs 2-4; all on
    the CPU for ``cpu``). ``backend``: the torch sampling loop, or vLLM (``docs/vllm.md``; needs the
    ``.venv-vllm`` environment) with ``vllm`` options. ``decode``/``compile`` (torch backend): the static-shape
    decode step and how it runs (``rl_core.generation.static``; ``auto``: static with a CUDA graph on CUDA, dynamic
    on the CPU and for architectures the static step does not support)."""

    max_new_tokens: Annotated[int, Field(ge=1)] = 32
    device: str | None = None
    processes: Annotated[int, Field(ge=1, le=1024)] = 1
    backend: Literal["torch", "vllm"] = "torch"
    decode: Literal["auto", "static", "dynamic"] = "auto"
    compile: Literal["auto", "eager", "inductor", "graph", "inductor-graph"] = "auto"
    vllm: VLLMOptions = Field(default_factory=lambda: VLLMOptions.model_validate({}))

    @field_validator("device")
    @classmethod
    def _device(cls, value: str | None) -> str | None:
        return None if value is None else _check_device(value, "generator.device")


class WeightSyncConfig(_Section):
    """How the trainer's weights reach the generator (``rl_core.engine.weight_sync``): ``auto`` is host shared
    memory on CPU and CUDA IPC with a GPU; ``nccl``/``gloo`` are bucketed broadcasts (``bucket_mb`` per message)
    over a process group at ``init_method`` (default: localhost, a free port). Every sync gives up after
    ``timeout_s`` and fails the run instead of hanging."""

    transport: Literal["auto", "shared_memory", "cuda_ipc", "nccl", "gloo"] = "auto"
    bucket_mb: Annotated[float, Field(gt=0, le=4096)] = 256.0
    timeout_s: Annotated[float, Field(gt=0)] = 120.0
    init_method: Annotated[str | None, Field(pattern=r"^tcp://[^:/]+:[0-9]+$")] = None


class HttpSinkConfig(_Section):
    """Report to the scalerl service. The token is read from the environment variable ``token_env``; ``lease_id``
    is the worker's lease when the run executes under one."""

    url: str
    run_id: Annotated[int, Field(ge=1)]
    lease_id: str | None = None
    token_env: str = "SCALERL_TOKEN"
    retries: Annotated[int, Field(ge=0)] = 5
    backoff: Annotated[float, Field(ge=0)] = 0.5
    timeout: Annotated[float, Field(gt=0)] = 10.0


class SinksConfig(_Section):
    jsonl: bool = True
    csv: bool = True
    console: bool = True
    console_every: Annotated[int, Field(ge=1)] = 1
    http: HttpSinkConfig | None = None


class BaseCheckpointConfig(_Section):
    """Start from the supervised warm-up checkpoint of ``rl_core.models.build_base_checkpoint`` (built once,
    cached by the hash of model, task, ``sft`` and seed; synthetic tasks only). ``seed``: the warm-up's seed
    (None: the run's), so that every seed of a grid can start from one base model, as RL from one pretrained
    model does (the base models of seeds 0 and 1 of the demo answer 0.18 and 0.09 of its validation problems)."""

    enabled: bool = False
    seed: Annotated[int, Field(ge=0)] | None = None
    sft: SFTConfig = Field(default_factory=lambda: SFTConfig.model_validate({}))
    demonstrations: Annotated[int, Field(ge=1)] = 20_000
    cache_dir: Path | None = None


class RunConfig(_Section):
    """A whole training run (see module doc)."""

    name: Annotated[str, Field(min_length=1, max_length=200)] = "run"
    seed: Annotated[int, Field(ge=0)] = 0
    device: str = "cpu"
    threads: Annotated[int, Field(ge=1)] | Literal["auto"] = 1
    recipe: Recipe
    model: ModelConfig
    task: TaskConfig
    base_checkpoint: BaseCheckpointConfig = Field(default_factory=lambda: BaseCheckpointConfig.model_validate({}))
    budget: BudgetConfig
    eval: EvalConfig = Field(default_factory=lambda: EvalConfig.model_validate({}))
    checkpoint: CheckpointConfig = Field(default_factory=lambda: CheckpointConfig.model_validate({}))
    trainer: TrainerConfig = Field(default_factory=lambda: TrainerConfig.model_validate({}))
    generator: GeneratorConfig = Field(default_factory=lambda: GeneratorConfig.model_validate({}))
    weight_sync: WeightSyncConfig = Field(default_factory=lambda: WeightSyncConfig.model_validate({}))
    sinks: SinksConfig = Field(default_factory=lambda: SinksConfig.model_validate({}))

    @field_validator("recipe", mode="before")
    @classmethod
    def _recipe(cls, value: Any) -> Recipe:
        if isinstance(value, str) and "\n" not in value and not value.endswith((".yaml", ".yml", ".json")):
            value = {"preset": value}
        return load_recipe(value)

    @field_validator("device")
    @classmethod
    def _device(cls, value: str) -> str:
        return _check_device(value, "device")

    @model_validator(mode="after")
    def _consistent(self) -> RunConfig:
        if self.trainer.backend == "torch" and self.trainer.zero_stage != 0:
            raise ValueError("trainer.zero_stage needs trainer.backend: deepspeed")
        if self.trainer.backend == "torch" and self.trainer.ranks != 1:
            raise ValueError("trainer.ranks > 1 needs trainer.backend: deepspeed (data-parallel DeepSpeed ranks)")
        if self.base_checkpoint.enabled and self.task.kind == "math":
            raise ValueError("base_checkpoint needs a synthetic task (its warm-up uses worked demonstrations)")
        if self.base_checkpoint.enabled and self.model.path is not None:
            raise ValueError("base_checkpoint builds from a model preset, not a model.path")
        gen = self.generator.device or self.device
        transport = self.weight_sync.transport
        if transport == "cuda_ipc" and self.device == "cpu" and gen == "cpu":
            raise ValueError("weight_sync.transport cuda_ipc needs a GPU: device or generator.device must be cuda")
        if transport == "nccl":
            if self.device == "cpu" or gen == "cpu":
                raise ValueError("weight_sync.transport nccl needs the trainer and the generator on GPUs")
            shared = set(self.trainer_devices()) & set(self.generator_devices())
            if shared:
                raise ValueError(
                    f"weight_sync.transport nccl needs the generators on other GPUs than the trainer ({sorted(shared)}"
                    " are both; NCCL cannot pair two ranks on one GPU); use cuda_ipc (or auto) to share a GPU"
                )
        return self

    def trainer_devices(self) -> list[str]:
        """The trainer ranks' devices (``device`` upwards), normalised (``cuda`` is ``cuda:0``)."""
        return device_sequence(self.device, self.trainer.ranks)

    def generator_devices(self) -> list[str]:
        """The generator processes' devices (``generator.device``, else ``device``, upwards), normalised."""
        return device_sequence(self.generator.device or self.device, self.generator.processes)

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


def _format_validation(exc: ValidationError) -> str:
    """Every problem on one line: ``invalid run config: budget.steps: ...; recipe: ...``."""
    problems = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "<config>"
        problems.append(f"{loc}: {' '.join(str(err['msg']).split())}")
    return "invalid run config: " + "; ".join(problems)


def parse_run_config(data: Any, *, source: str = "config") -> RunConfig:
    """Validate a mapping; ``ConfigError`` lists every bad key (recipe problems included)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: a run config must be a mapping, got {type(data).__name__}")
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_validation(exc)) from None
    except RecipeError as exc:
        raise ConfigError(" ".join(str(exc).split())) from None


def load_run_config(path: str | Path) -> RunConfig:
    """Read and validate a YAML run config file."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file {str(p)!r} does not exist")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p} is not valid YAML: {' '.join(str(exc).split())}") from None
    cfg = parse_run_config(data, source=str(p))
    check_files(cfg)
    return cfg


def check_files(cfg: RunConfig) -> None:
    """Fail early (``ConfigError``) when a file the run needs is missing: a local model directory or a math JSONL."""
    problems = []
    if cfg.model.path is not None and not (cfg.model.path / "config.json").is_file():
        problems.append(f"model.path: {str(cfg.model.path)!r} is not a local Hugging Face model directory")
    path = getattr(cfg.task, "path", None)
    if path is not None and not Path(path).is_file():
        problems.append(f"task.path: {str(path)!r} does not exist")
    if problems:
        raise ConfigError("missing file: " + "; ".join(problems))
