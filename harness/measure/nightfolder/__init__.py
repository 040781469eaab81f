"""The night folder's format: names, the SQLite journal, its schema and migration, rows,
transitions, progress and the night lock's holder; driving a night is `harness.driver.night`'s."""
