"""Build the engine tier's tiny model, deterministically and with no hub.

`python tiny_model.py OUT` (run with the engine venv's Python: it needs transformers,
tokenizers and torch) writes a LlamaForCausalLM of 115,008 parameters (hidden 64, two
layers, two heads of head_dim 32, the smallest head vLLM's CPU attention accepts), random
weights from seed 0 in float32, with a byte-level BPE tokenizer of 512 tokens trained on a
generated corpus. A rebuild with the same lock gives the same bytes, so its control pins
every file by sha256 like any model (`harness model pin OUT` prints them).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

VOCAB = 512
SEED = 0


def corpus() -> list[str]:
    """A fixed text to train the tokenizer on: the same lines on every machine."""
    words = ["the", "capital", "of", "france", "is", "paris", "engine", "cache", "block",
             "token", "model", "config", "graph", "kernel", "memory", "start", "generation",
             "observe", "witness", "seal", "lock", "night"]
    return [" ".join(words[(i * 7 + j * 3) % len(words)] for j in range(12))
            for i in range(400)]


def tokenizer(out: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<s>", "</s>", "<unk>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>")
    fast.save_pretrained(str(out))


def model(out: Path) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(SEED)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                         head_dim=32, max_position_embeddings=256, tie_word_embeddings=True,
                         bos_token_id=0, eos_token_id=1, torch_dtype="float32")
    LlamaForCausalLM(config).to(torch.float32).save_pretrained(str(out))


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: tiny_model.py OUT", file=sys.stderr)
        return 2
    target = Path(argv[0])
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".tiny-model-", dir=target.parent))
    try:
        model(scratch)
        tokenizer(scratch)
        for path in scratch.iterdir():
            path.chmod(0o644)  # save_pretrained writes 0600; containers may run as non-root
        scratch.chmod(0o755)
        if target.exists():
            shutil.rmtree(target)
        scratch.rename(target)
    finally:
        if scratch.exists():
            shutil.rmtree(scratch)
    for path in sorted(target.iterdir()):
        print(f"{path.name} {path.stat().st_size}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
