"""Reverse-mode CHAD transformations: `efficient` (Efficient CHAD (Smeding & Vákár), Fig. 7, the
formalisation's `chad`) and `naive` (Efficient CHAD (Smeding & Vákár), Fig. 2 with the dense environment
vectors of Fig. 4)."""
