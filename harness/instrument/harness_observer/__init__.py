"""harness_observer: the in-container observer of the engine configuration.

Standard library only, relative imports only: in the container this folder is imported as
`harness_observer` (PYTHONPATH=/opt/harness-instrument), on the host as
`harness.instrument.harness_observer`. Modules:

- encode: the one canonical typed encoder, its decoder, and the observation reader.
- snapshot: walk a config object into dotted fields; build and write observation documents.
- trace: passive transition trace of config post-init, platform defaults, watched fields.
- plugin: the `vllm.general_plugins` entry point and the worker extension class: the engine
  core and each worker observe themselves.
- driver: `python3 -m harness_observer.driver`, the offline workload; it observes the
  front-end (the process that called `LLM`).
"""

VERSION = "1.1"  # 1.1: every process that holds the configuration is observed
