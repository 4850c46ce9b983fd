"""Block-first pruning: cut an output into evidence blocks (``evidence``), shortlist the blocks worth
scoring (``shortlist``) and decide whole blocks from their scores (``decoder``)."""
