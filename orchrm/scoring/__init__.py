"""Scoring with a reward model: one interface (`base.py`) over a model loaded here
(`local.py`, on the backbone and saved form of `backbone.py`, in the precision of
`precision.py`) and a model behind a reward server (`remote.py` over `remote_http.py`
and the servers' protocols in `remote_protocols.py`); `load.py` makes either, `files.py`
scores record files.
"""
