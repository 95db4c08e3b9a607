"""The HTML viewer of `orchrm view`: one task's candidates, their scores and
picks (`page.py`), the page (`html.py`), each plan's graph (`graph.py`) and the
`view.json` the page reads and `orchrm view` re-reads (`json_form.py`).
"""
