"""Gate records: what one gate run means (`judge`), what the whole run comes to (`outcome`),
the sealed record and its reader (`record`, `show`); harness.probe.gaterun runs the commands."""
