"""The HTTP edge: ASGI middleware (hosts, body and header limits, admission, timing), database failures as JSON
answers, and the bounded pool that parses request bodies. Knows nothing of experiments or runs."""
