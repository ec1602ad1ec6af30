"""What a session log must satisfy, checked where a log is written or taken in.

``surface`` holds the rules every append obeys (which event types carry a surface operation);
``payload`` checks an event's data against its payload type, on append and on load;
``invariants`` checks a whole log's structure (turn and step brackets, tool-result pairing), run
on every finished turn under dev invariants; ``journal`` is the gate a journal from elsewhere
passes before a store takes it. Each check names the first thing wrong — the event, its ``seq`` and
the rule — and never repairs: repair is ``session.repair``'s, and appends what it changes.
"""
