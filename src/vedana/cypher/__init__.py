"""Cypher as text: tokenizing, the read-only guard, and the shape of a capped query."""
