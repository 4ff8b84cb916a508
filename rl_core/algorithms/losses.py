"""Per-token policy losses behind one registry: cispo, dapo, grpo, ppo, gspo, reinforce.

Each loss takes its constants from its own variant of the recipe's ``loss`` section (``CispoLoss.eps_max``,
``DapoLoss.eps_low``/``eps_high``, ``SymmetricClipLoss.eps_low`` for grpo and ppo, ``GspoLoss.gspo_eps_*``); the
shared ``kl_coef`` adds a k3 KL term to any of them.

Every loss maps the same inputs to a per-token loss to *minimise* (the negated objective); the batch-level
normaliser is applied separately by ``aggregation`` so that micro-batching and data parallelism are exact.

Notation: rho_t = pi_train(y_t) / pi_old(y_t), where pi_old is the generator's (possibly stale) policy whose
log-probs came back with the rollout. Invariants shared by all losses:
- ``per_token`` is exactly 0 where ``mask`` is 0, and masked positions receive zero gradient even when their
  log-probs are non-finite.
- ``old_logprobs``, ``advantages`` and ``ref_logprobs`` are constants (never differentiated).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
from torch import Tensor

from rl_core.recipe.model import (
    LOSS_VARIANTS,
    CispoLoss,
    DapoLoss,
    GspoLoss,
    LossConfig,
    ReinforceLoss,
    SymmetricClipLoss,
)


@dataclass(frozen=True)
class PolicyLossInputs:
    """A batch of responses, right-padded to [B, T].

    ``logprobs``: trainer log pi(y_t), differentiable. ``old_logprobs``: generator log pi_old(y_t).
    ``advantages``: [B] (one per response) or [B, T]. ``mask``: [B, T], nonzero for tokens in the loss.
    ``ref_logprobs``: reference-policy log-probs, required when ``kl_coef > 0``.
    """

    logprobs: Tensor
    old_logprobs: Tensor
    advantages: Tensor
    mask: Tensor
    ref_logprobs: Tensor | None = None


@dataclass(frozen=True)
class PolicyLossOutputs:
    """``per_token``: [B, T] loss to minimise. ``ratio``: [B, T] detached ratio the loss used (the sequence
    ratio for gspo; 1 where masked). ``clipped``: [B, T] bool, tokens whose ratio was clipped or capped.
    ``kl``: [B, T] detached k3 estimate, or None when ``kl_coef == 0``."""

    per_token: Tensor
    ratio: Tensor
    clipped: Tensor
    kl: Tensor | None = None


#: A registered loss: the inputs and the recipe's ``loss`` section (the variant of the loss's own type).
PolicyLossFn = Callable[[PolicyLossInputs, Any], PolicyLossOutputs]

POLICY_LOSSES: dict[str, PolicyLossFn] = {}

_Cfg = TypeVar("_Cfg")
_Loss = Callable[[PolicyLossInputs, _Cfg], PolicyLossOutputs]


def register_policy_loss(name: str) -> Callable[[_Loss[_Cfg]], _Loss[_Cfg]]:
    """Decorator adding a loss to ``POLICY_LOSSES`` under ``name`` (names are unique). The loss is called with
    the recipe's ``loss`` section of type ``name`` (its variant in ``rl_core.recipe.LOSS_VARIANTS``), so it reads
    only its own constants; a section of another type is refused before the loss runs."""

    def deco(fn: _Loss[_Cfg]) -> _Loss[_Cfg]:
        if name in POLICY_LOSSES:
            raise ValueError(f"policy loss {name!r} is already registered")

        variant = LOSS_VARIANTS.get(name)

        def checked(inputs: PolicyLossInputs, cfg: Any) -> PolicyLossOutputs:
            if getattr(cfg, "type", None) != name or (variant is not None and not isinstance(cfg, variant)):
                raise TypeError(f"policy loss {name!r} needs a loss section of type {name!r}, got {cfg!r}")
            return fn(inputs, cfg)

        POLICY_LOSSES[name] = checked
        return fn

    return deco


def get_policy_loss(name: str) -> PolicyLossFn:
    """The registered loss called ``name``; a KeyError lists the registered names."""
    try:
        return POLICY_LOSSES[name]
    except KeyError:
        raise KeyError(f"unknown policy loss {name!r}; registered: {', '.join(sorted(POLICY_LOSSES))}") from None


@dataclass(frozen=True)
class _Prepared:
    mask: Tensor  # bool [B, T]
    logprobs: Tensor  # masked positions replaced by 0 (gradient-safe)
    log_ratio: Tensor  # detached old side; 0 where masked
    advantages: Tensor  # [B, T], detached, 0 where masked


def _prepare(inputs: PolicyLossInputs) -> _Prepared:
    lp = inputs.logprobs
    if inputs.old_logprobs.shape != lp.shape or inputs.mask.shape != lp.shape or lp.dim() != 2:
        raise ValueError(
            f"logprobs, old_logprobs and mask must share one [B, T] shape; got {tuple(lp.shape)}, "
            f"{tuple(inputs.old_logprobs.shape)}, {tuple(inputs.mask.shape)}"
        )
    mask = inputs.mask.bool()
    zero = torch.zeros((), dtype=lp.dtype, device=lp.device)
    safe_lp = torch.where(mask, lp, zero)
    safe_old = torch.where(mask, inputs.old_logprobs.detach().to(lp.dtype), zero)
    adv = inputs.advantages.detach().to(lp.dtype)
    if adv.dim() == 1:
        adv = adv[:, None]
    adv = torch.where(mask, adv.expand_as(lp), zero)
    return _Prepared(mask=mask, logprobs=safe_lp, log_ratio=safe_lp - safe_old, advantages=adv)


def _kl_term(inputs: PolicyLossInputs, prep: _Prepared, kl_coef: float) -> tuple[Tensor, Tensor | None]:
    """k3 estimator of KL(pi || pi_ref): exp(d) - d - 1 with d = log pi_ref - log pi (>= 0, unbiased)."""
    zero = torch.zeros_like(prep.logprobs)
    if kl_coef == 0.0:
        return zero, None
    if inputs.ref_logprobs is None:
        raise ValueError("kl_coef > 0 needs ref_logprobs")
    ref = torch.where(prep.mask, inputs.ref_logprobs.detach().to(prep.logprobs.dtype), zero)
    d = ref - prep.logprobs
    k3 = torch.where(prep.mask, torch.exp(d) - d - 1.0, zero)
    return kl_coef * k3, k3.detach()


def _finish(
    inputs: PolicyLossInputs,
    prep: _Prepared,
    kl_coef: float,
    objective: Tensor,
    ratio: Tensor,
    clipped: Tensor,
) -> PolicyLossOutputs:
    kl_loss, kl = _kl_term(inputs, prep, kl_coef)
    zero = torch.zeros_like(objective)
    per_token = torch.where(prep.mask, -objective + kl_loss, zero)
    one = torch.ones_like(ratio)
    return PolicyLossOutputs(
        per_token=per_token,
        ratio=torch.where(prep.mask, ratio.detach(), one),
        clipped=clipped & prep.mask,
        kl=kl,
    )


def clipped_surrogate(ratio: Tensor, advantages: Tensor, low: float, high: float) -> tuple[Tensor, Tensor]:
    """min(rho·A, clip(rho, low, high)·A) and the mask of tokens where the clipped branch wins.

    Where the clipped branch is strictly smaller the term is a constant, so those tokens get exactly zero
    gradient; elsewhere the gradient is A·∇rho. The value equals the textbook min in every case.
    """
    clipped_ratio = ratio.detach().clamp(min=low, max=high)
    unclipped = ratio * advantages
    clipped_obj = clipped_ratio * advantages
    is_clipped = clipped_obj < unclipped.detach()
    return torch.where(is_clipped, clipped_obj, unclipped), is_clipped


@register_policy_loss("cispo")
def cispo_loss(inputs: PolicyLossInputs, cfg: CispoLoss) -> PolicyLossOutputs:
    """CISPO: objective sg(min(rho, eps_max))·A·log pi. Gradient = sg(w)·A·∇log pi for every token;
    capped tokens keep their gradient (weight eps_max) instead of losing it. ``eps_max`` is an absolute cap
    (eps_max = 5 caps rho at 5, not 6)."""
    prep = _prepare(inputs)
    ratio = torch.exp(prep.log_ratio.detach())
    weight = ratio.clamp(max=cfg.eps_max)
    objective = weight * prep.advantages * prep.logprobs
    return _finish(inputs, prep, cfg.kl_coef, objective, ratio, ratio > cfg.eps_max)


def _ppo_family(inputs: PolicyLossInputs, kl_coef: float, low: float, high: float) -> PolicyLossOutputs:
    prep = _prepare(inputs)
    ratio = torch.exp(prep.log_ratio)
    objective, is_clipped = clipped_surrogate(ratio, prep.advantages, low, high)
    return _finish(inputs, prep, kl_coef, objective, ratio, is_clipped)


@register_policy_loss("dapo")
def dapo_loss(inputs: PolicyLossInputs, cfg: DapoLoss) -> PolicyLossOutputs:
    """DAPO clip-higher: min(rho·A, clip(rho, 1 - eps_low, 1 + eps_high)·A)."""
    return _ppo_family(inputs, cfg.kl_coef, 1.0 - cfg.eps_low, 1.0 + cfg.eps_high)


@register_policy_loss("grpo")
def grpo_loss(inputs: PolicyLossInputs, cfg: SymmetricClipLoss) -> PolicyLossOutputs:
    """GRPO: the symmetric clipped surrogate, clip(rho, 1 - eps_low, 1 + eps_low)."""
    return _ppo_family(inputs, cfg.kl_coef, 1.0 - cfg.eps_low, 1.0 + cfg.eps_low)


@register_policy_loss("ppo")
def ppo_loss(inputs: PolicyLossInputs, cfg: SymmetricClipLoss) -> PolicyLossOutputs:
    """PPO-clip: the symmetric clipped surrogate (same token term as grpo; recipes differ elsewhere)."""
    return _ppo_family(inputs, cfg.kl_coef, 1.0 - cfg.eps_low, 1.0 + cfg.eps_low)


@register_policy_loss("gspo")
def gspo_loss(inputs: PolicyLossInputs, cfg: GspoLoss) -> PolicyLossOutputs:
    """GSPO: sequence ratio s_i = exp(mean_t log rho_{i,t}), clipped to [1 - gspo_eps_low, 1 + gspo_eps_high].

    Written token-wise (GSPO-token): each token carries sg(s_i)·pi(y_t)/sg(pi(y_t)), whose value is s_i and
    whose gradient is s_i·∇log pi(y_t); with ``sample`` aggregation this is exactly GSPO's sequence-level
    gradient.
    """
    prep = _prepare(inputs)
    lengths = prep.mask.sum(dim=1, keepdim=True).clamp(min=1).to(prep.logprobs.dtype)
    seq_log_ratio = prep.log_ratio.detach().sum(dim=1, keepdim=True) / lengths
    seq_ratio = torch.exp(seq_log_ratio).expand_as(prep.logprobs)
    token_ratio = seq_ratio * torch.exp(prep.logprobs - prep.logprobs.detach())
    objective, is_clipped = clipped_surrogate(
        token_ratio, prep.advantages, 1.0 - cfg.gspo_eps_low, 1.0 + cfg.gspo_eps_high
    )
    return _finish(inputs, prep, cfg.kl_coef, objective, seq_ratio, is_clipped)


@register_policy_loss("reinforce")
def reinforce_loss(inputs: PolicyLossInputs, cfg: ReinforceLoss) -> PolicyLossOutputs:
    """Plain REINFORCE: A·log pi, no importance correction (``ratio`` is reported for monitoring only)."""
    prep = _prepare(inputs)
    ratio = torch.exp(prep.log_ratio.detach())
    objective = prep.advantages * prep.logprobs
    return _finish(inputs, prep, cfg.kl_coef, objective, ratio, torch.zeros_like(prep.mask))


def compute_policy_loss(cfg: LossConfig, inputs: PolicyLossInputs) -> PolicyLossOutputs:
    """Run the loss of the recipe's ``loss`` section (``cfg.type``) on ``inputs``, with that section's constants."""
    return get_policy_loss(cfg.type)(inputs, cfg)
