"""The language layer: safe YAML, the formula language, units, packs, catalogs, models and the unit check."""
