"""Layer 5, probe: runs what the host has, to gather the facts a judgement needs.

The judge (layer 4) decides and never runs anything; what it decides on has to be found on
this host first: the gates' commands and their output, git's word on the checkout,
OpenSSH's check of a signature, what the Docker engine holds, the GPU devices and tools.
Each probe runs those, hands the judge typed values (a `GateRun`, a `CleanCheck`, a
`SignatureCheck`, `MapFacts`), and writes what the judge decided where it belongs (a sealed
gate record, an approval and its signature, the doctor's lines). A judge module that needs
a host fact takes it as an argument; it never imports this layer (contract `layers`).

- `gates`: `harness gates`, each gate's command in its own process group, sealed as a record;
- `approval`: `harness approve` and the run-time approval check;
- `sshsig`: OpenSSH signatures (`ssh-keygen -Y`), for approvals and evidence bundles;
- `doctor`: `harness doctor`'s facts about the engine, devices, paths and the GPU map.
"""
