"""Items, datasets, and the loaders for the supported input formats."""

from capmetrics.data.loaders import FORMATS, from_coco, from_gts_res, load_dataset
from capmetrics.data.model import Dataset, Item, Problem

__all__ = ["FORMATS", "Dataset", "Item", "Problem", "from_coco", "from_gts_res", "load_dataset"]
