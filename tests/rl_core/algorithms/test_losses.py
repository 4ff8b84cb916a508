"""Policy losses: closed-form values on hand-made tensors and gradients via autograd."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from pydantic import TypeAdapter

from rl_core.algorithms.losses import (
    POLICY_LOSSES,
    PolicyLossInputs,
    compute_policy_loss,
    get_policy_loss,
)
from rl_core.recipe import (
    LOSS_VARIANTS,
    CispoLoss,
    DapoLoss,
    GspoLoss,
    LossConfig,
    Recipe,
    ReinforceLoss,
    SymmetricClipLoss,
    apply_overrides,
)

# Two responses, T = 3; the second is padded at t = 2.
LP = [[-1.0, -0.5, -2.0], [-0.3, -1.2, 0.0]]
LOG_RATIO = [[0.0, math.log(1.5), math.log(0.5)], [math.log(7.0), math.log(0.7), 0.0]]
ADV = [1.0, -2.0]
MASK = [[1, 1, 1], [1, 1, 0]]


def _inputs(adv: list[float] = ADV, **kw: torch.Tensor) -> tuple[PolicyLossInputs, torch.Tensor]:
    lp = torch.tensor(LP, dtype=torch.float64, requires_grad=True)
    old = lp.detach() - torch.tensor(LOG_RATIO, dtype=torch.float64)
    inputs = PolicyLossInputs(
        logprobs=lp, old_logprobs=old, advantages=torch.tensor(adv, dtype=torch.float64), mask=torch.tensor(MASK), **kw
    )
    return inputs, lp


def _grad(per_token: torch.Tensor, lp: torch.Tensor) -> torch.Tensor:
    (g,) = torch.autograd.grad(per_token.sum(), lp)
    return g


def _t(x: list[list[float]]) -> torch.Tensor:
    return torch.tensor(x, dtype=torch.float64)


def _default(name: str) -> LossConfig:
    """The recipe's loss section of type ``name`` with its default constants."""
    return LOSS_VARIANTS[name].model_validate({"type": name})  # type: ignore[return-value]


def test_registry_holds_every_loss() -> None:
    assert set(POLICY_LOSSES) == {"cispo", "dapo", "grpo", "ppo", "gspo", "reinforce"} == set(LOSS_VARIANTS)
    with pytest.raises(KeyError, match="registered: cispo"):
        get_policy_loss("sgd")


def test_a_loss_refuses_another_types_section() -> None:
    inputs = _inputs()[0]
    with pytest.raises(TypeError, match="policy loss 'dapo' needs a loss section of type 'dapo'"):
        get_policy_loss("dapo")(inputs, CispoLoss())
    # A CISPO section relabelled without validation has no DAPO constants: refused, not read.
    with pytest.raises(TypeError, match="policy loss 'dapo'"):
        compute_policy_loss(CispoLoss().model_copy(update={"type": "dapo"}), inputs)
    assert torch.equal(
        compute_policy_loss(_default("grpo"), inputs).per_token,
        get_policy_loss("grpo")(inputs, _default("grpo")).per_token,
    )


def test_cispo_values_and_gradient_is_sg_weight_times_advantage() -> None:
    inputs, lp = _inputs()
    out = compute_policy_loss(CispoLoss(eps_max=5.0), inputs)
    # weight = min(rho, 5) = [[1, 1.5, 0.5], [5 (capped from 7), 0.7]]; loss = -w·A·log pi
    assert torch.allclose(out.per_token, _t([[1.0, 0.75, 1.0], [-3.0, -1.68, 0.0]]))
    assert out.clipped.tolist() == [[False, False, False], [True, False, False]]
    # d/d log pi = -sg(w)·A: capped tokens keep a gradient (weight 5), unlike PPO clipping.
    assert torch.allclose(_grad(out.per_token, lp), _t([[-1.0, -1.5, -0.5], [10.0, 1.4, 0.0]]))
    assert torch.allclose(out.ratio, _t([[1.0, 1.5, 0.5], [7.0, 0.7, 1.0]]))


def test_cispo_cap_is_absolute_not_an_offset() -> None:
    inputs, lp = _inputs()
    out = compute_policy_loss(CispoLoss(eps_max=4.0), inputs)
    assert _grad(out.per_token, lp)[1, 0].item() == pytest.approx(8.0)  # -min(7, 4)·(-2)


def test_dapo_asymmetric_clip_values_and_zero_gradient_on_clipped_tokens() -> None:
    inputs, lp = _inputs()
    out = compute_policy_loss(DapoLoss(eps_low=0.2, eps_high=0.28), inputs)
    # range [0.8, 1.28]. Row 0 (A=+1): rho 1.5 clipped to 1.28; rho 0.5 stays (min picks 0.5).
    # Row 1 (A=-2): rho 7 stays (min(-14, -2.56) = -14); rho 0.7 clipped to 0.8 (min(-1.4, -1.6) = -1.6).
    assert torch.allclose(out.per_token, _t([[-1.0, -1.28, -0.5], [14.0, 1.6, 0.0]]))
    assert out.clipped.tolist() == [[False, True, False], [False, True, False]]
    # Unclipped tokens: d(-rho·A)/d log pi = -A·rho; clipped tokens: exactly zero.
    grad = _grad(out.per_token, lp)
    assert torch.allclose(grad, _t([[-1.0, 0.0, -0.5], [14.0, 0.0, 0.0]]))
    assert (grad[out.clipped] == 0.0).all()


@pytest.mark.parametrize("name", ["grpo", "ppo"])
def test_grpo_and_ppo_symmetric_clip(name: str) -> None:
    inputs, lp = _inputs()
    out = compute_policy_loss(SymmetricClipLoss(type=name, eps_low=0.2), inputs)  # type: ignore[arg-type]
    # range [0.8, 1.2]; rho 1.5 with A>0 is clipped at 1.2 (DAPO's 0.28 would leave it at 1.28).
    assert torch.allclose(out.per_token, _t([[-1.0, -1.2, -0.5], [14.0, 1.6, 0.0]]))
    grad = _grad(out.per_token, lp)
    assert grad[0, 1].item() == 0.0 and grad[1, 1].item() == 0.0
    assert grad[0, 0].item() == pytest.approx(-1.0) and grad[1, 0].item() == pytest.approx(14.0)


def test_gspo_sequence_ratio_values_and_gradient() -> None:
    inputs, lp = _inputs()
    out = compute_policy_loss(GspoLoss(), inputs)
    s0 = 0.75 ** (1 / 3)  # exp(mean(0, ln 1.5, ln 0.5))
    s1 = math.sqrt(4.9)  # exp(mean(ln 7, ln 0.7)) over the 2 unpadded tokens
    # Row 0: A=+1, s0 < 1 - 3e-4 -> unclipped; row 1: A=-2, s1 > 1 + 4e-4 -> min picks the unclipped -2·s1.
    assert torch.allclose(out.per_token, _t([[-s0, -s0, -s0], [2 * s1, 2 * s1, 0.0]]))
    assert torch.allclose(out.ratio, _t([[s0, s0, s0], [s1, s1, 1.0]]))
    assert torch.allclose(_grad(out.per_token, lp), _t([[-s0, -s0, -s0], [2 * s1, 2 * s1, 0.0]]))
    # Flip the advantages: now row 1 (A=+2, s1 above the range) is clipped as a whole sequence.
    inputs, lp = _inputs(adv=[-1.0, 2.0])
    out = compute_policy_loss(GspoLoss(), inputs)
    assert out.clipped.tolist() == [[True, True, True], [True, True, False]]
    assert torch.equal(_grad(out.per_token, lp), torch.zeros(2, 3, dtype=torch.float64))
    assert out.per_token[1, 0].item() == pytest.approx(-2 * (1 + 4e-4))


def test_gspo_with_sample_mean_equals_sequence_level_gradient() -> None:
    inputs, lp = _inputs()
    out = compute_policy_loss(GspoLoss(), inputs)
    lengths = inputs.mask.sum(1, keepdim=True).double()
    sample_mean = (out.per_token / lengths).sum()
    # GSPO: -Σ_i s_i·A_i with s_i = exp(mean_t(log pi - log pi_old)) (all unclipped here).
    lr = (lp - inputs.old_logprobs) * inputs.mask
    s = torch.exp(lr.sum(1) / lengths.squeeze(1))
    reference = -(s * inputs.advantages).sum()
    (g1,) = torch.autograd.grad(sample_mean, lp)
    (g2,) = torch.autograd.grad(reference, lp)
    assert torch.allclose(g1, g2)


def test_reinforce_has_no_importance_weight() -> None:
    inputs, lp = _inputs()
    out = compute_policy_loss(ReinforceLoss(), inputs)
    assert torch.allclose(out.per_token, _t([[1.0, 0.5, 2.0], [-0.6, -2.4, 0.0]]))
    assert torch.equal(_grad(out.per_token, lp), _t([[-1.0, -1.0, -1.0], [2.0, 2.0, 0.0]]))
    assert not out.clipped.any()


def test_kl_k3_term_value_and_gradient() -> None:
    delta = _t([[0.1, -0.2, 0.3], [0.0, 0.5, 9.0]])
    lp0 = torch.tensor(LP, dtype=torch.float64)
    inputs, lp = _inputs(ref_logprobs=lp0 + delta)
    base = compute_policy_loss(ReinforceLoss(), inputs)
    out = compute_policy_loss(ReinforceLoss(kl_coef=0.1), inputs)
    k3 = (torch.exp(delta) - delta - 1) * torch.tensor(MASK)
    assert out.kl is not None and torch.allclose(out.kl, k3)
    assert torch.allclose(out.per_token - base.per_token.detach(), 0.1 * k3)
    grad_kl = _grad(out.per_token, lp) - _grad(base.per_token, lp)
    assert torch.allclose(grad_kl, 0.1 * (1 - torch.exp(delta)) * torch.tensor(MASK))
    with pytest.raises(ValueError, match="ref_logprobs"):
        compute_policy_loss(CispoLoss(kl_coef=0.1), _inputs()[0])


@pytest.mark.parametrize("name", sorted(POLICY_LOSSES))
def test_masked_non_finite_positions_are_inert(name: str) -> None:
    lp = torch.tensor(LP, dtype=torch.float64)
    lp[1, 2] = -math.inf
    lp.requires_grad_(True)
    old = torch.tensor(LP, dtype=torch.float64) - torch.tensor(LOG_RATIO, dtype=torch.float64)
    old[1, 2] = math.nan
    inputs = PolicyLossInputs(lp, old, torch.tensor(ADV, dtype=torch.float64), torch.tensor(MASK))
    out = compute_policy_loss(_default(name), inputs)
    grad = _grad(out.per_token, lp)
    assert torch.isfinite(out.per_token).all() and torch.isfinite(grad).all()
    assert out.per_token[1, 2].item() == 0.0 and grad[1, 2].item() == 0.0


def test_shape_errors_are_reported() -> None:
    with pytest.raises(ValueError, match=r"\[B, T\]"):
        compute_policy_loss(
            CispoLoss(), PolicyLossInputs(torch.zeros(2, 3), torch.zeros(2, 2), torch.zeros(2), torch.ones(2, 3))
        )


def test_cispo_parameter_gradient_is_sum_of_weighted_score_functions() -> None:
    """∇θ of the CISPO loss equals −Σ_t sg(min(rho_t, eps_max))·Â·∇θ log pi(y_t), built token by token."""
    torch.manual_seed(0)
    policy = torch.nn.Linear(4, 6).double()
    feats = torch.randn(2, 3, 4, dtype=torch.float64)
    targets = torch.tensor([[1, 4, 2], [0, 5, 3]])
    mask = torch.tensor(MASK)
    adv = torch.tensor(ADV, dtype=torch.float64)

    def logp() -> torch.Tensor:
        return torch.log_softmax(policy(feats), -1).gather(-1, targets[..., None])[..., 0]

    old = logp().detach() - torch.tensor(LOG_RATIO, dtype=torch.float64)  # rho as in LOG_RATIO (one capped at 5)
    out = compute_policy_loss(CispoLoss(eps_max=5.0), PolicyLossInputs(logp(), old, adv, mask))
    got = torch.autograd.grad(out.per_token.sum(), list(policy.parameters()))

    weight = torch.exp(torch.tensor(LOG_RATIO, dtype=torch.float64)).clamp(max=5.0)
    expected = [torch.zeros_like(p) for p in policy.parameters()]
    for i in range(2):
        for t in range(3):
            if mask[i, t]:
                score = torch.autograd.grad(logp()[i, t], list(policy.parameters()))
                for e, s in zip(expected, score, strict=True):
                    e -= weight[i, t] * adv[i] * s
    for g, e in zip(got, expected, strict=True):
        assert torch.allclose(g, e, atol=1e-12)


#: Values the losses gave before they took their constants from the recipe's tagged loss section (its "about").
_PINNED_FILE = json.loads((Path(__file__).parent / "pinned_losses.json").read_text())
PIN = _PINNED_FILE["inputs"]
PINNED: dict[str, tuple[LossConfig, list[list[float]], list[list[float]], list[list[int]]]] = {
    name: (TypeAdapter(LossConfig).validate_python(p["config"]), p["per_token"], p["grad"], p["clipped"])
    for name, p in _PINNED_FILE["losses"].items()
}
# grpo and ppo are one loss (the symmetric clip range [1 - eps_low, 1 + eps_low]): the same numbers.
PINNED["ppo"] = (SymmetricClipLoss(type="ppo", eps_low=0.15, kl_coef=0.05), *PINNED["grpo"][1:])


def _pinned_inputs() -> tuple[PolicyLossInputs, torch.Tensor]:
    lp = torch.tensor(PIN["log_probs"], dtype=torch.float64, requires_grad=True)
    old = lp.detach() - _t(PIN["log_ratio"])
    advantages, mask = torch.tensor(PIN["advantages"], dtype=torch.float64), torch.tensor(PIN["mask"])
    return PolicyLossInputs(lp, old, advantages, mask, _t(PIN["ref_log_probs"])), lp


@pytest.mark.parametrize("name", list(PINNED))
def test_losses_give_the_numbers_they_gave_before_the_tagged_loss_section(name: str) -> None:
    cfg, per_token, grad, clipped = PINNED[name]
    inputs, lp = _pinned_inputs()
    out = compute_policy_loss(cfg, inputs)
    assert torch.allclose(out.per_token, _t(per_token), rtol=1e-12, atol=1e-13)
    assert torch.allclose(_grad(out.per_token, lp), _t(grad), rtol=1e-12, atol=1e-13)
    assert out.clipped.int().tolist() == clipped
    # The same section reached through a recipe's overrides is the same section.
    assert apply_overrides(Recipe(), {f"loss.{k}": v for k, v in cfg.model_dump().items()}).loss == cfg


@pytest.mark.parametrize("name", list(PINNED))
def test_every_constant_of_a_loss_moves_the_pinned_example(name: str) -> None:
    cfg, per_token, _, _ = PINNED[name]
    for key, value in cfg.model_dump().items():
        if isinstance(value, float):
            out = compute_policy_loss(cfg.model_copy(update={key: value * 1.1}), _pinned_inputs()[0])
            assert not torch.allclose(out.per_token, _t(per_token), rtol=1e-12, atol=1e-13), key
