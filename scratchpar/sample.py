"""``python -m scratchpar.sample CKPT``: text from a trained language model's checkpoint.

The model comes back from the checkpoint alone (``train/trained.py``), whatever strategy and
world size trained it, and writes one token at a time after the prompt, with a cache so that
each token costs one position's work (``nn/generate.py``). The text streams to standard output
as it is drawn; what was loaded and how fast it ran go to standard error.
"""

from __future__ import annotations

import argparse
import sys
import time

from .backend import DEVICES
from .data import Characters, DataError, SyntheticLanguage
from .nn.generate import generate
from .nn.gpt import GPT
from .train.trained import LOAD_ERRORS, load_trained

EXIT_BAD_INPUT, EXIT_INTERRUPTED = 2, 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m scratchpar.sample",
        description="Generate text from a language model's checkpoint (--save DIR of "
                    "python -m scratchpar.train): characters of the text it was trained on, or "
                    "words of the synthetic language (w3 w17 … with . ending a sentence).")
    parser.add_argument("checkpoint", metavar="CKPT", help="the checkpoint's directory")
    parser.add_argument("--prompt", default="",
                        help="text to continue (default: a new line, or a new sentence)")
    parser.add_argument("--tokens", type=int, default=200, help="tokens to generate (200)")
    parser.add_argument("--temperature", type=float, default=1.0,
                        help="divide the logits by this; 0 takes the likeliest token (1.0)")
    parser.add_argument("--top-k", type=int, default=None,
                        help="draw among the k likeliest tokens only (default: all)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the draws (0)")
    parser.add_argument("--device", choices=DEVICES, default="cpu",
                        help="where the model runs (cpu)")
    return parser


def problems(args) -> list[str]:
    return [text for bad, text in (
        (args.tokens < 0, f"--tokens must be at least 0, got {args.tokens}"),
        (not args.temperature >= 0, f"--temperature must be at least 0, got {args.temperature}"),
        (args.top_k is not None and args.top_k < 1, f"--top-k must be at least 1, got "
                                                    f"{args.top_k}"),
        (args.seed < 0, f"--seed must be at least 0, got {args.seed}")) if bad]


def prompt_ids(data, text: str) -> list[int]:
    """The ids of ``text`` in the data's vocabulary; an empty prompt starts a new line of a
    text (its first character where it has no new line) or a new sentence."""
    if isinstance(data, Characters) and not text:
        text = "\n" if "\n" in data.chars else data.chars[0]
    return data.encode(text).tolist()


def how(trained, args) -> str:
    """What was loaded and what the sampler does, in a line."""
    model, cfg = trained.task.model, trained.cfg
    params = sum(p.size for p in model.parameters())
    data = cfg.data.path if cfg.data.source == "text" else "the synthetic language"
    draw = "the likeliest token each time" if args.temperature == 0 else \
        f"temperature {args.temperature:g}" + (f", top-{args.top_k}" if args.top_k else "")
    cache = (f"keys and values cached per block, the {model.max_len}-token window sliding by "
             "half when full" if isinstance(model, GPT) else
             "each layer's state carried from token to token")
    return (f"{args.checkpoint}: {cfg.model.kind}, {params:,} parameters, step "
            f"{trained.step}, trained on {data}; {args.tokens} tokens, {draw}, seed "
            f"{args.seed}; {cache}")


def main(argv: list[str] | None = None) -> int:
    """Exit status 0; 2 for a bad flag, checkpoint, prompt or device; 130 when interrupted."""
    args = build_parser().parse_args(argv)
    try:
        bad = problems(args)
        if bad:
            raise ValueError("; ".join(bad))
        trained = load_trained(args.checkpoint, args.device, text=False)
        if trained.task.unit != "tok":
            raise ValueError(f"{args.checkpoint} holds a model of {trained.cfg.data.source} "
                             "data, not a language model: there is no text to sample")
        data = trained.task.dataset
        try:
            prompt = prompt_ids(data, args.prompt)
        except DataError as e:
            raise ValueError(f"--prompt: {e}") from None
    except (ValueError, *LOAD_ERRORS) as e:
        print(f"scratchpar.sample: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(how(trained, args), file=sys.stderr, flush=True)
    sentences = isinstance(data, SyntheticLanguage)  # each sentence starts anew after BOS
    forbidden = (data.PAD,) + ((data.BOS,) if sentences else ())
    restart = (data.EOS, [data.BOS]) if sentences else None
    start, n = time.perf_counter(), 0
    sys.stdout.write(data.decode(prompt))
    try:
        for token in generate(trained.task.model, prompt, args.tokens, args.temperature,
                              args.top_k, args.seed, forbidden, restart):
            sys.stdout.write(data.decode([token]))
            sys.stdout.flush()
            n += 1
    except KeyboardInterrupt:
        print(f"\nscratchpar.sample: interrupted after {n} tokens", file=sys.stderr)
        return EXIT_INTERRUPTED
    seconds = time.perf_counter() - start
    print(f"\n{n} tokens in {seconds:.2f} s ({n / max(seconds, 1e-9):,.0f} tokens/s)",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
