"""The run folder's one owner: its names (`layout`), its record (`record`, run.json), its
seal (`manifest`, SHA256SUMS) and the rerun index beside it read back (`reruns`). A low
layer: it imports only harness.base.errors, atomic, readfile, tree, hashing, catalogue and the
instrument's stdlib `contract` (names shared with the container), so every stage can use it."""
