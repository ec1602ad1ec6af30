"""Outside text to inert markup: the one renderer every displayed text goes through.

``safe_html`` turns what a model, a tool, a frontend, a journal or a server wrote into HTML that
cannot run or fetch anything (Markdown parsed here, then an allowlist sanitiser), and into a
Markdown alternative whose HTML-significant characters are all escaped. ``static_style`` is the
look that markup carries inline (a saved notebook keeps no stylesheet). Pure functions of text: no
Jupyter, no widgets, so the views, the store's query results and the course report all use them.
"""
