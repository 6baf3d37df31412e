"""``python -m tests.k8s_emulator``: an emulator in its own process; its URL is printed first.

``GET /_emulator/requests`` answers the requests served so far, by verb.
"""

from tests.k8s_emulator.server import serve_forever

serve_forever()
