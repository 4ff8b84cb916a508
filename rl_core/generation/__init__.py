"""Generation: a batched torch sampling loop with a KV cache and in-flight weight updates, evaluation, FLOPs.

- ``Generator(model, tokenizer, recipe, *, device, max_new_tokens, seed)``; ``generate(problems, n, *, weights,
  version) -> list[Rollout]`` (n per problem, grouped); ``load_weights(version, tensors)`` in place.
- ``Rollout``: ids, per-token generator log-probs, policy versions and loss mask, finish reason, text.
- ``BaseGenerator`` (``base.py``): what the torch ``Generator`` and ``VLLMGenerator`` share (``generate`` and its
  counters, the prompt codec, the policy version, weight polling); ``ResponseRow`` (``rollout.py``): one response
  under construction, the same for both.
- ``evaluate(generator, task, *, split, k, limit) -> EvalResult`` (mean@k pass rate).
- ``decoder_flops_per_token(config, *, context)``, ``sequence_flops``, ``matmul_params``.

Details and invariants: ``docs/engine-core.md``.
"""

from rl_core.generation.evaluate import EvalResult, evaluate
from rl_core.generation.flops import decoder_flops_per_token, matmul_params, sequence_flops
from rl_core.generation.generator import GenerationStats, Generator, WeightSource
from rl_core.generation.rollout import Rollout
from rl_core.generation.sampling import sample_next
from rl_core.generation.weights import WeightLoader

__all__ = [
    "EvalResult",
    "GenerationStats",
    "Generator",
    "Rollout",
    "WeightLoader",
    "WeightSource",
    "decoder_flops_per_token",
    "evaluate",
    "matmul_params",
    "sample_next",
    "sequence_flops",
]
