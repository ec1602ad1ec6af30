"""The agent's view of the open notebook: the ``dsh.notebook`` comm and the tools that use it.

``comm`` serves the notebook extension's comms by client session (request and reply with ids, a
timeout, every frontend text capped where it enters; contract in ``docs/dev/notebook-comm.md``).
``tools`` owns ``notebook_read`` and ``notebook_insert``: their checks before approval, their cards
and result texts, and the fallbacks without the extension (the saved file, ``set_next_input``).
``cells`` reads a notebook's cells (a frontend's reply or the saved file) into what the model is
shown; ``file`` finds the notebook a kernel serves, following a rename. A cell is served only by
the comm of its own client session: several are ``NOTEBOOK_AMBIGUOUS``, never a guess.
"""
