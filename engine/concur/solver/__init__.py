"""The solver: structure, plans, block solving, inversion, goal seek and solutions."""
