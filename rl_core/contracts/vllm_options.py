"""``VLLMOptions``: the vLLM backend's settings (the run config's ``generator.vllm`` section).

Pure data (pydantic only, never imports vLLM), so a config can be validated where vLLM is not installed.
Unknown keys are errors; the object is frozen.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt

__all__ = ["VLLMOptions"]


class VLLMOptions(BaseModel):
    """Engine settings of ``VLLMGenerator`` (see ``docs/vllm.md``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: "auto": the dtype of the model handed to ``from_model`` (the recipe's ``precision.generator_dtype``).
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    #: eager PyTorch (no torch.compile / CUDA graphs): starts in ~2 s; set false on a GPU for speed.
    enforce_eager: bool = True
    #: most sequences vLLM schedules in one step (the rest of a ``generate`` call waits in its queue).
    max_num_seqs: PositiveInt = 256
    #: tokens per scheduler step (prefill chunking); None: vLLM's default.
    max_num_batched_tokens: PositiveInt | None = None
    #: context length of the engine; None: prompt limit + the generator's cap, bounded by the model's positions.
    max_model_len: PositiveInt | None = None
    #: GPU only: share of GPU memory vLLM may use (weights + KV cache).
    gpu_memory_utilization: Annotated[float, Field(gt=0.0, le=1.0)] = 0.9
    #: CPU only: KV-cache size in GiB (the environment variable VLLM_CPU_KVCACHE_SPACE, if set, wins).
    cpu_kvcache_gib: Annotated[float, Field(gt=0.0)] = 1.0
    #: vLLM's own log lines (INFO per engine start); "WARNING" keeps the generator's process quiet.
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "WARNING"
