"""Bring your own trainer and logs: the TRL callback (``scalerl.integrations.trl``, needs ``transformers``) and
the log readers behind ``scalerl watch`` and ``scalerl import`` (``scalerl.integrations.readers``)."""
