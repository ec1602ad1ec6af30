"""The kernel's agent host: the one object that owns the agent, its provider, store and views.

``agent_host`` builds and rebuilds the agent from the kernel's ``settings``; ``bridge`` carries
approvals and ``ask_user`` questions to the running cell's view; ``viewing`` shows a chat cell's
live view; ``busy`` keeps Stop and the steer box working while the agent's code holds the main
thread. The kernel class talks to the host, never to the agent's parts directly.
"""
