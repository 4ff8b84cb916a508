"""The RL recipe's components as small pure-torch pieces (CPU or GPU, no services).

- ``losses``: policy-loss registry (cispo, dapo, grpo, ppo, gspo, reinforce) on ``PolicyLossInputs``.
- ``aggregation``: token / sample / prompt weights with a batch-global normaliser.
- ``objective``: a recipe's loss + aggregation on one micro-batch, with metrics.
- ``advantages``: rewards (+ overlong penalty); group-mean baseline; batch / group / no std normalisation.
- ``filters``: zero-variance drop (ScaleRL) and DAPO dynamic sampling.
- ``curriculum``: No-Positive-Resampling with ``state_dict``/``load_state_dict``.
- ``length``: forced-interruption and token-cap state machines, overlong penalty, truncation stats.
- ``fp32_head``: FP32 LM head for HF causal LMs; per-token log-probs of a model.
- ``optim``: the recipe's AdamW, warm-up + constant/linear/cosine schedule, gradient clipping.

Formulas, recipe keys and defaults: ``docs/algorithms.md``.
"""

from rl_core.algorithms.advantages import compute_advantages, group_mean, recipe_rewards, rewards_from_correctness
from rl_core.algorithms.aggregation import AGGREGATIONS, aggregate, aggregate_loss, token_weights
from rl_core.algorithms.curriculum import NoPositiveResampling
from rl_core.algorithms.filters import (
    DynamicSampler,
    FilterResult,
    drop_zero_variance,
    is_zero_variance,
    nonzero_variance_mask,
)
from rl_core.algorithms.fp32_head import (
    FP32LMHead,
    enable_fp32_lm_head,
    has_fp32_lm_head,
    logprobs_from_logits,
    position_ids_from_mask,
    token_logprobs,
)
from rl_core.algorithms.length import (
    INTERRUPTION_PHRASE,
    FinishReason,
    ForcedInterruption,
    LengthController,
    LengthStats,
    Phase,
    Step,
    TokenBudget,
    length_stats,
    make_length_controller,
    overlong_penalty,
    sample_thinking_budget,
    truncation_rate,
)
from rl_core.algorithms.losses import (
    POLICY_LOSSES,
    PolicyLossInputs,
    PolicyLossOutputs,
    clipped_surrogate,
    compute_policy_loss,
    get_policy_loss,
    register_policy_loss,
)
from rl_core.algorithms.objective import ObjectiveResult, policy_objective
from rl_core.algorithms.optim import build_optimizer, build_scheduler, clip_gradients, lr_multiplier

__all__ = [
    "AGGREGATIONS",
    "INTERRUPTION_PHRASE",
    "POLICY_LOSSES",
    "DynamicSampler",
    "FP32LMHead",
    "FilterResult",
    "FinishReason",
    "ForcedInterruption",
    "LengthController",
    "LengthStats",
    "NoPositiveResampling",
    "ObjectiveResult",
    "Phase",
    "PolicyLossInputs",
    "PolicyLossOutputs",
    "Step",
    "TokenBudget",
    "aggregate",
    "aggregate_loss",
    "build_optimizer",
    "build_scheduler",
    "clip_gradients",
    "clipped_surrogate",
    "compute_advantages",
    "compute_policy_loss",
    "drop_zero_variance",
    "enable_fp32_lm_head",
    "get_policy_loss",
    "group_mean",
    "has_fp32_lm_head",
    "is_zero_variance",
    "length_stats",
    "logprobs_from_logits",
    "lr_multiplier",
    "make_length_controller",
    "nonzero_variance_mask",
    "overlong_penalty",
    "policy_objective",
    "position_ids_from_mask",
    "recipe_rewards",
    "register_policy_loss",
    "rewards_from_correctness",
    "sample_thinking_budget",
    "token_logprobs",
    "token_weights",
    "truncation_rate",
]
