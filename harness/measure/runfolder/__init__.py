"""The run folder's one owner: its names, record (run.json), seal (SHA256SUMS) and rerun
index. A low layer (base and the instrument's stdlib contract only), so every stage can use it."""
