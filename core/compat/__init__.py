"""Drop-in replacements for APIs that captioning code already calls.

:mod:`capmetrics.compat.pycocoevalcap` mirrors pycocoevalcap (``COCOEvalCap`` and the scorer
classes), computed by capmetrics' own metrics; :mod:`capmetrics.compat.cider` mirrors
ruotianluo/cider's ``CiderD``/``Cider`` (self-critical.pytorch's rewards), prepro_ngrams' df
pickles included.
"""
