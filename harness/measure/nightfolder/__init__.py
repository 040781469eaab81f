"""The night folder's one owner, beside the run folder's (`runfolder`): a night is
evidence, read by status, reports and bundles without the driver that wrote it.

`naming` (where nights live, `<campaign>-<UTC stamp>`, and the files in a night folder),
`journal` (the SQLite journal, `journal.sqlite`, opened and written), `schema` (its file
format and the checks that refuse any other file), `migrate` (journals an older harness
wrote), `rows` (a row, one attempt at one planned slot), `transitions` (a row's legal
moves, and the recovery a fresh start makes), `progress` (how far a night is) and
`holder` (who holds the night lock, read back). Driving a night (what runs next, the
retry and stop policies, the lock's taking) is `harness.driver.night`'s.
"""
