"""A course's rules in the kernel: its settings, the AI policy, and the daily budgets.

``config`` reads what an administrator configured (files and environment); ``policy`` decides
and enforces the AI policy for a notebook (it only ever tightens what the kernel allows);
``budgets`` gates the agent's spending by the course's daily limits and prices. A rule that
refuses something says which rule and how to change it.
"""
