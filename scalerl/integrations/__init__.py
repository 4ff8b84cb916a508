"""Bring your own trainer and logs: the TRL callback (``scalerl.integrations.trl``, needs ``transformers``), the
log readers behind ``scalerl watch`` and ``scalerl import`` (``scalerl.integrations.readers``; wandb offline runs in
``wandb_offline``) and scalerl's decision as an Optuna pruner (``scalerl.integrations.optuna_pruner``, needs
``optuna``; replayed through Optuna by ``optuna_replay``)."""
