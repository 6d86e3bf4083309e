"""Reverse-mode CHAD transformations: `efficient` (seed 000 Fig. 7, the
formalisation's `chad`) and `naive` (seed 000 Fig. 2 with the dense environment
vectors of Fig. 4)."""
