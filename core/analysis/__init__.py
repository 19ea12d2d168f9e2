"""Analysis of scores: meta-evaluation against human judgments (:mod:`.meta`), paired system
comparison (:mod:`.compare`) and plots of permutation nulls (:mod:`.plots`)."""
