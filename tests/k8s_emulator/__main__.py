"""``python -m tests.k8s_emulator``: an emulator in its own process; its URL is printed first.

``GET /_emulator/requests`` answers the requests served so far, by verb. ``--cost-model`` makes
it charge what a real server charges (``cost_model.py``; its parameters by the other flags).
"""

import argparse

from tests.k8s_emulator.cost_model import CostModel
from tests.k8s_emulator.server import serve_forever

defaults = CostModel()
parser = argparse.ArgumentParser(prog="python -m tests.k8s_emulator")
parser.add_argument("--port", type=int, default=0)
parser.add_argument("--cost-model", action="store_true", help="Charge what a real server does.")
parser.add_argument("--write-latency-ms", type=float, default=defaults.write_latency * 1000)
parser.add_argument("--max-writes-in-flight", type=int, default=defaults.max_writes_in_flight)
parser.add_argument("--controller-qps", type=float, default=defaults.controller_qps)
parser.add_argument("--controller-burst", type=int, default=defaults.controller_burst)
arguments = parser.parse_args()
try:
    cost_model = (
        CostModel(
            write_latency=arguments.write_latency_ms / 1000,
            max_writes_in_flight=arguments.max_writes_in_flight,
            controller_qps=arguments.controller_qps,
            controller_burst=arguments.controller_burst,
        )
        if arguments.cost_model
        else None
    )
except ValueError as error:
    parser.error(str(error))
serve_forever(arguments.port, cost_model)
