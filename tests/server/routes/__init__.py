"""Tests of server/routes/: the REST surface as clients see it (events, the OpenAPI document, bad input, the CLI)."""
