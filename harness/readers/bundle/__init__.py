"""Evidence bundles: BagIt bags of run folders that a reviewer verifies offline."""

from harness.readers.bundle.export import ExportResult, export_bundle
from harness.readers.bundle.safe_extract import Limits, safe_extract
from harness.readers.bundle.verify import VerifyReport, verify_bundle, verify_tree

__all__ = [
    "ExportResult",
    "Limits",
    "VerifyReport",
    "export_bundle",
    "safe_extract",
    "verify_bundle",
    "verify_tree",
]
