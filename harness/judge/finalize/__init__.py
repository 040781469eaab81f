"""Gate-0 finalizer: compare the start-up and generation observations and refuse any
difference in engine identity. Pure decisions live in pins/compare/rules/contract/report;
documents and refinalize are the thin I/O shells.

The package imports none of its modules: import the one you need (`harness.judge.finalize.rules`,
`harness.judge.finalize.documents`, ...). A reader of one observation document (`harness show`,
`harness diff`) then does not load the contract's YAML parser and the pins with it."""
