"""What a component is: the base classes of the kinds (:mod:`.base`), the pluggy hook
specifications plugins implement (:mod:`.hookspecs`), the spec grammar (:mod:`.spec`), the
statistics protocol for computing in parts (:mod:`.protocols`), the permutation tests and p-value
combination statistics build on (:mod:`.permutation`, :mod:`.pvalues`) and a metric's language
(:mod:`.language`)."""
