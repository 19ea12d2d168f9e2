"""Adapters to other libraries' APIs, each a thin layer over :func:`capmetrics.score` and the
components (they translate shapes and names and compute no metric of their own):

- :mod:`capmetrics.integrations.pycocoevalcap`: pycocoevalcap's ``COCOEvalCap`` and scorers;
- :mod:`capmetrics.integrations.cider`: ruotianluo/cider's ``CiderD``/``Cider`` (self-critical);
- :mod:`capmetrics.integrations.dffiles`: the one reader of document-frequency files
  (self-critical's df pickles, read without running code; capmetrics' JSON and npz);
- :mod:`capmetrics.integrations.rewards`: CIDEr-D/BLEU rewards for self-critical training;
- :mod:`capmetrics.integrations.torchmetrics`: torchmetrics ``Metric`` classes, sharded under DDP;
- :mod:`capmetrics.integrations.hf`: a ``compute_metrics`` for Hugging Face's ``Trainer``.

The former paths (``capmetrics.integrations.*``, ``capmetrics.integrations.rewards``,
``capmetrics.integrations.torchmetrics``, ``capmetrics.integrations.hf``) re-export the same
objects. Submodules are imported on use (torchmetrics and hf need their extras).
"""
