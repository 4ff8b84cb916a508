"""The typed recipe: every knob of an RL post-training recipe as plain, validated data.

Invariants:
- Every model forbids unknown keys and is frozen; a recipe is hashable data, not behaviour.
- ``loss`` is tagged: ``loss.type`` selects a variant that holds only its own constants (plus the shared
  ``aggregation`` and ``kl_coef``), so a key of another variant is an error rather than an ignored value.
- ``Recipe()`` (all defaults) is the paper's ScaleRL recipe; ``presets.get_preset("scalerl") == Recipe()``.
- Nothing here imports torch: the server validates recipes without the training stack.

Formulas and the meaning of every key: ``docs/algorithms.md``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

#: The paper's forced-interruption phrase (scalerl-paper.md §2), appended verbatim at the thinking budget.
INTERRUPTION_PHRASE = "Okay, time is up. Let me stop thinking and formulate a final answer now. </think>"

LossType = Literal["cispo", "dapo", "grpo", "ppo", "gspo", "reinforce"]
Aggregation = Literal["token", "sample", "prompt"]
AdvantageNormalization = Literal["batch", "group", "none"]
RewardScheme = Literal["pm1", "binary"]
ZeroVarianceMode = Literal["drop", "dynamic_sampling", "none"]
PassRateHistory = Literal["last", "cumulative"]
LengthMode = Literal["interruption", "overlong_penalty", "none"]
DType = Literal["bfloat16", "float16", "float32"]
PipelineMode = Literal["pipeline", "ppo_off_policy", "sync"]
OptimizerName = Literal["adamw"]
ScheduleName = Literal["constant", "linear", "cosine"]


def _not_bool(value: object) -> object:
    """Numbers must not be given as booleans (pydantic's lax mode would turn ``true`` into 1)."""
    if isinstance(value, bool):
        raise ValueError("expected a number, got a boolean")
    return value


_NotBool = BeforeValidator(_not_bool)
#: No count in a recipe (tokens, prompts, steps, ...) is this large; a larger one is a typo, refused here rather
#: than failing later in a worker's allocation.
MAX_COUNT = 2**31 - 1
PositiveFloat = Annotated[float, Field(gt=0.0, allow_inf_nan=False), _NotBool]
NonNegativeFloat = Annotated[float, Field(ge=0.0, allow_inf_nan=False), _NotBool]
HalfOpenUnit = Annotated[float, Field(ge=0.0, lt=1.0), _NotBool]
PositiveInt = Annotated[int, Field(gt=0, le=MAX_COUNT), _NotBool]
NonNegativeInt = Annotated[int, Field(ge=0, le=MAX_COUNT), _NotBool]


class _Section(BaseModel):
    """Base of every recipe section: unknown keys are errors, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


class _LossSection(_Section):
    """What every loss variant holds: its ``type`` (the tag that selects the variant) and the shared keys.

    ``aggregation`` turns per-token terms into the batch loss; ``kl_coef`` adds a k3 KL penalty to any loss.
    """

    type: LossType
    aggregation: Aggregation = "prompt"
    kl_coef: NonNegativeFloat = 0.0


class CispoLoss(_LossSection):
    """CISPO. ``eps_max`` is the *absolute* cap on the importance ratio (weight = min(rho, eps_max)), not an
    offset from 1."""

    type: Literal["cispo"] = "cispo"
    eps_max: PositiveFloat = 5.0


class DapoLoss(_LossSection):
    """DAPO's clip-higher surrogate: the ratio is clipped to [1 - eps_low, 1 + eps_high]."""

    type: Literal["dapo"] = "dapo"
    eps_low: HalfOpenUnit = 0.2
    eps_high: NonNegativeFloat = 0.28


class SymmetricClipLoss(_LossSection):
    """GRPO and PPO: the symmetric clipped surrogate, ratio clipped to [1 - eps_low, 1 + eps_low]."""

    type: Literal["grpo", "ppo"]
    eps_low: HalfOpenUnit = 0.2


class GspoLoss(_LossSection):
    """GSPO: the sequence ratio is clipped to [1 - gspo_eps_low, 1 + gspo_eps_high]."""

    type: Literal["gspo"] = "gspo"
    gspo_eps_low: HalfOpenUnit = 3e-4
    gspo_eps_high: NonNegativeFloat = 4e-4


class ReinforceLoss(_LossSection):
    """Plain REINFORCE: no importance weight, no constants of its own."""

    type: Literal["reinforce"] = "reinforce"


#: The class of each ``loss.type``, in the order of ``LossType``.
LOSS_VARIANTS: Mapping[str, type[_LossSection]] = MappingProxyType(
    {
        "cispo": CispoLoss,
        "dapo": DapoLoss,
        "grpo": SymmetricClipLoss,
        "ppo": SymmetricClipLoss,
        "gspo": GspoLoss,
        "reinforce": ReinforceLoss,
    }
)

#: Every key of the loss section before it was tagged, when one flat section held every variant's constants.
#: Every recipe dumped then (stored recipes and deltas, saved run configs) has all of them.
FLAT_LOSS_KEYS = frozenset(
    {"type", "eps_max", "eps_low", "eps_high", "gspo_eps_low", "gspo_eps_high", "aggregation", "kl_coef"}
)


def _loss_input(value: object) -> object:
    """A ``loss`` mapping without ``type`` is CISPO's (the default). A mapping with every key of the flat section
    (a recipe dumped before the section was tagged) keeps only its own variant's keys: no loss read the others,
    so the recipe means what it meant. Any other key of another variant stays, and validation refuses it."""
    if not isinstance(value, Mapping):
        return value
    data = {"type": "cispo", **value}
    tag = data["type"]
    variant = LOSS_VARIANTS.get(tag) if isinstance(tag, str) else None
    if variant is not None and FLAT_LOSS_KEYS <= data.keys():
        data = {k: v for k, v in data.items() if k in variant.model_fields or k not in FLAT_LOSS_KEYS}
    return data


#: The ``loss`` section: one variant per loss type, each holding its own constants and the shared keys, so a key
#: of another variant (``{type: cispo, eps_high: 0.3}``) is an error, not a silently ignored value.
LossConfig = Annotated[
    CispoLoss | DapoLoss | SymmetricClipLoss | GspoLoss | ReinforceLoss,
    Field(discriminator="type"),
    BeforeValidator(_loss_input),
]


class AdvantageConfig(_Section):
    """Group-mean baseline, then optional division by a standard deviation (batch- or group-wide)."""

    normalization: AdvantageNormalization = "batch"
    std_eps: PositiveFloat = 1e-6


class RewardConfig(_Section):
    """Verifiable rewards: ``pm1`` gives +1/-1, ``binary`` gives 1/0 (truncated answers count as wrong)."""

    scheme: RewardScheme = "pm1"


class FilterConfig(_Section):
    """What happens to prompts whose G rewards are all equal (zero advantage, zero gradient).

    ``drop``: removed from the loss, the batch is not refilled (ScaleRL). ``dynamic_sampling``: removed and
    the batch is refilled by sampling more prompts, at most ``max_refill_rounds`` extra rounds (DAPO).
    """

    zero_variance: ZeroVarianceMode = "drop"
    max_refill_rounds: PositiveInt = 3


class CurriculumConfig(_Section):
    """No-Positive-Resampling: prompts whose pass rate reaches ``pass_rate_threshold`` leave later epochs."""

    no_positive_resampling: bool = True
    pass_rate_threshold: Annotated[float, Field(gt=0.0, le=1.0), _NotBool] = 0.9
    history: PassRateHistory = "last"


class InterruptionConfig(_Section):
    """Forced interruption: thinking budget ~ U{budget_min..budget_max}, then phrase + answer budget."""

    budget_min: PositiveInt = 10_240
    budget_max: PositiveInt = 12_288
    answer_budget: PositiveInt = 2_048
    phrase: Annotated[str, Field(min_length=1)] = INTERRUPTION_PHRASE
    mask_injected: bool = True

    @model_validator(mode="after")
    def _budget_range(self) -> InterruptionConfig:
        if self.budget_min > self.budget_max:
            raise ValueError(f"budget_min ({self.budget_min}) must be <= budget_max ({self.budget_max})")
        return self


class OverlongConfig(_Section):
    """DAPO soft overlong punishment: linear penalty over the last ``cache_tokens`` before the length cap."""

    cache_tokens: PositiveInt = 4_096
    penalty: PositiveFloat = 1.0


class LengthConfig(_Section):
    """Length control. ``max_response_tokens`` is the hard cap on generated tokens in every mode."""

    mode: LengthMode = "interruption"
    max_prompt_tokens: PositiveInt = 2_048
    max_response_tokens: PositiveInt = 14_336
    interruption: InterruptionConfig = InterruptionConfig()
    overlong: OverlongConfig = OverlongConfig()

    @model_validator(mode="after")
    def _fits(self) -> LengthConfig:
        if self.mode == "interruption":
            need = self.interruption.budget_max + self.interruption.answer_budget
            if need > self.max_response_tokens:
                raise ValueError(
                    f"interruption.budget_max + interruption.answer_budget = {need} exceeds "
                    f"max_response_tokens = {self.max_response_tokens}"
                )
        if self.mode == "overlong_penalty" and self.overlong.cache_tokens >= self.max_response_tokens:
            raise ValueError(
                f"overlong.cache_tokens ({self.overlong.cache_tokens}) must be < "
                f"max_response_tokens ({self.max_response_tokens})"
            )
        return self


class PrecisionConfig(_Section):
    """Numeric formats of generator and trainer; ``fp32_lm_head`` makes the LM head fp32 in both.
    ``lm_head_operands``: how the FP32 head's matmul is computed (``rl_core.algorithms.split_matmul``): ``float32``
    (exact, float32 rate), ``bfloat16`` (float32 accumulation and logits over bf16-rounded operands: tensor cores,
    log-probs off by ~1e-2), ``bf16x6`` (error-compensated: three bf16 pieces per operand, tensor cores, float32
    accuracy) or ``bf16x3`` (two pieces: ~4e-5 off)."""

    fp32_lm_head: bool = True
    lm_head_operands: Literal["float32", "bfloat16", "bf16x3", "bf16x6"] = "float32"
    generator_dtype: DType = "bfloat16"
    trainer_dtype: DType = "bfloat16"


class PipelineConfig(_Section):
    """Off-policy algorithm.

    ``pipeline``: PipelineRL-k, streaming generation with in-flight weight updates; trainers wait when they
    are ``k`` steps ahead. ``ppo_off_policy``: generate k batches with one policy, then take k gradient steps.
    ``sync``: generate one batch, take one step. In ``sync`` mode ``k`` is meaningless and normalised to 1.
    """

    mode: PipelineMode = "pipeline"
    k: PositiveInt = 8

    @model_validator(mode="after")
    def _sync_k(self) -> PipelineConfig:
        if self.mode == "sync" and self.k != 1:
            return self.model_copy(update={"k": 1})
        return self


class BatchConfig(_Section):
    """Prompts per optimiser step × generations per prompt (the paper's batch 768 = 48 × 16)."""

    prompts: PositiveInt = 48
    generations: Annotated[int, Field(ge=2, le=MAX_COUNT), _NotBool] = 16

    @property
    def size(self) -> int:
        """Total number of sampled responses per step."""
        return self.prompts * self.generations


class SamplingConfig(_Section):
    """Generator sampling; log-probs on both sides are of the tempered distribution."""

    temperature: PositiveFloat = 1.0
    top_p: Annotated[float, Field(gt=0.0, le=1.0), _NotBool] = 1.0


class OptimizerConfig(_Section):
    """AdamW as in the paper: lr 5e-7, eps 1e-15, weight decay 0.01."""

    name: OptimizerName = "adamw"
    lr: PositiveFloat = 5e-7
    betas: tuple[HalfOpenUnit, HalfOpenUnit] = (0.9, 0.999)
    eps: PositiveFloat = 1e-15
    weight_decay: NonNegativeFloat = 0.01
    max_grad_norm: PositiveFloat | None = 1.0


class ScheduleConfig(_Section):
    """Learning-rate schedule: linear warm-up of ``warmup_steps``, then ``type``."""

    type: ScheduleName = "constant"
    warmup_steps: NonNegativeInt = 100
    total_steps: PositiveInt | None = None
    min_lr_ratio: Annotated[float, Field(ge=0.0, le=1.0), _NotBool] = 0.0

    @model_validator(mode="after")
    def _decay_needs_total(self) -> ScheduleConfig:
        if self.type != "constant" and self.total_steps is None:
            raise ValueError(f"schedule type {self.type!r} needs total_steps")
        if self.total_steps is not None and self.warmup_steps > self.total_steps:
            raise ValueError(f"warmup_steps ({self.warmup_steps}) must be <= total_steps ({self.total_steps})")
        return self


class Recipe(_Section):
    """One complete RL recipe. Defaults are the paper's ScaleRL recipe."""

    loss: LossConfig = CispoLoss()
    advantage: AdvantageConfig = AdvantageConfig()
    reward: RewardConfig = RewardConfig()
    filters: FilterConfig = FilterConfig()
    curriculum: CurriculumConfig = CurriculumConfig()
    length: LengthConfig = LengthConfig()
    precision: PrecisionConfig = PrecisionConfig()
    pipeline: PipelineConfig = PipelineConfig()
    batch: BatchConfig = BatchConfig()
    sampling: SamplingConfig = SamplingConfig()
    optimizer: OptimizerConfig = OptimizerConfig()
    schedule: ScheduleConfig = ScheduleConfig()
