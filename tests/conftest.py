"""Suite-wide settings.

``DSH_DEV_INVARIANTS=1`` turns on the agent's dev invariants for every test: each request any test
sends to a provider is checked against the request rebuilt from the log alone (system prompt +
``derive_messages()`` + the folded request header), and every finished turn's log must pass the
structural invariants checker. A test that breaks either fails, whatever it asserts itself.
"""

from __future__ import annotations

import os

os.environ["DSH_DEV_INVARIANTS"] = "1"
