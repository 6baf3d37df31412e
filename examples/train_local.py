"""A stand-in training script for the local example: a few epochs of a falling loss, printed."""

from __future__ import annotations

import argparse
import math
import os
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=int(os.environ.get("EPOCHS", "3")))
    parser.add_argument("--seconds-per-epoch", type=float, default=0.3)
    args = parser.parse_args()
    print(f"training on {os.environ.get('HOSTNAME', 'this machine')} for {args.epochs} epochs", flush=True)
    for epoch in range(1, args.epochs + 1):
        time.sleep(args.seconds_per_epoch)
        print(f"epoch {epoch}/{args.epochs}  loss {2.5 * math.exp(-0.6 * epoch):.4f}", flush=True)
    print("done: model saved to the scratch directory (not really)", flush=True)


if __name__ == "__main__":
    main()
