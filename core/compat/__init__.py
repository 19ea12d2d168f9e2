"""Former home of the drop-in shims, now in :mod:`capmetrics.integrations`:
``capmetrics.compat.pycocoevalcap`` and ``capmetrics.compat.cider`` re-export
:mod:`capmetrics.integrations.pycocoevalcap` and :mod:`capmetrics.integrations.cider`.
"""
