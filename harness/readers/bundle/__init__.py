"""Evidence bundles: BagIt bags of run folders that a reviewer verifies offline."""
