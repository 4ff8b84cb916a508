"""Live event streams: one change feed per experiment, fanned out to every open stream of it (server-sent events)."""
