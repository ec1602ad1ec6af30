"""Each step's model request: what it holds, whether it fits, and whether it may be sent.

``envelope`` builds a request and the envelope events it is sent with; ``step`` turns a step's
inputs into the frozen ``GenerateRequest``; ``window`` knows a route's context window and where it
came from; ``fit`` decides what fits in it (the warning, the refusal, the output cap); ``meter``
estimates how much of the window the history uses; ``spend`` enforces the daily budgets before a
request goes out. Nothing here talks to a provider: a request that may not be sent fails with a
``DshError`` naming the limit.
"""
