"""One process of the service: the :class:`~server.runtime.context.ServiceContext` built once per app (settings,
engine, sessions, pools, caches, background workers) and the first start (migrate, first token)."""
