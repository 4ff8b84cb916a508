"""Plain helpers with no service state: constrained types, JSON-safe values, bounded parsing of untrusted bodies."""
