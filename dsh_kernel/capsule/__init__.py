"""The session capsule: a turn's events carried in the saved notebook (issue 34; ``docs/capsule.md``).

* ``format`` — build a turn's capsule (``capsule_of``) and read one back, checked (``read_capsule``);
* ``strip`` — remove the capsules from notebooks (``dsh-kernel strip``).
"""

from typing import Final

CAPSULE_KEY: Final = "application/vnd.dsh.capsule+json"
"""Where a chat cell's saved output carries its turn's capsule (in the output's ``metadata``)."""
