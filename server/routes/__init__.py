"""HTTP routes, one module per resource; all under ``/api/v1`` except ``/healthz``."""
