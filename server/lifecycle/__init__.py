"""What exists and how it changes: grid documents and experiments, recipes, runs and their status machine, tokens,
and the request/response bodies of those resources."""
