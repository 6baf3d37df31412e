"""``python -m tests.k8s_emulator``: an emulator in its own process; its URL is printed first.

``GET /_emulator/requests`` answers the requests served so far, by verb (``?by=token``: by
the bearer token each carried, then by verb). ``--cost-model`` makes
it charge what a real server charges (``cost_model.py``; its parameters by the other flags).
"""

import argparse

from tests.k8s_emulator.cost_model import (
    CostModel,
    add_cost_model_arguments,
    cost_model_from_arguments,
)
from tests.k8s_emulator.server import serve_forever

parser = argparse.ArgumentParser(prog="python -m tests.k8s_emulator")
parser.add_argument("--port", type=int, default=0)
add_cost_model_arguments(parser, CostModel(), on=False)
arguments = parser.parse_args()
serve_forever(arguments.port, cost_model_from_arguments(parser, arguments))
