"""Drop-in replacements for APIs that captioning code already calls.

:mod:`capmetrics.compat.pycocoevalcap` mirrors pycocoevalcap (``COCOEvalCap`` and the scorer
classes), computed by capmetrics' own metrics.
"""
