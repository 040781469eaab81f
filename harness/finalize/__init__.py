"""Gate-0 finalizer: compare the start-up and generation observations and refuse any
difference in engine identity. Pure decisions live in pins/compare/rules/contract/report;
documents and refinalize are the thin I/O shells. The `refinalize` function is not
re-exported here: it would hide the `harness.finalize.refinalize` module of the same name."""

from harness.finalize.compare import classify, compare_fields
from harness.finalize.contract import ContractError, load_contract_text, parse_contract
from harness.finalize.documents import DocumentError, read_document
from harness.finalize.pins import Member, load_pins, member_of
from harness.finalize.refinalize import judge_run, standing, write_addendum
from harness.finalize.report import render
from harness.finalize.rules import RULES, exit_code, judge

__all__ = [
    "RULES", "ContractError", "DocumentError", "Member", "classify", "compare_fields",
    "exit_code", "judge", "judge_run", "load_contract_text", "load_pins", "member_of",
    "parse_contract", "read_document", "render", "standing", "write_addendum",
]
