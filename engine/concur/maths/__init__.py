"""Mathematics below the formula language: Erlang B/C and friends (no sympy, no pint)."""
