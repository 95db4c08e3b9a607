"""Scoring with a reward model: one interface (`base.py`: `Scorer.score`, items in and
`Scored` out, and `Scorer.info`, a `ModelInfo`) over a model loaded here (`local.py`, on
the saved model of `orchrm.rmodel`), a model behind a reward server (`remote.py` over
`remote_http.py` and the servers' protocols in `remote_protocols.py`) and the offline
world's stand-in scorer of plans (`world.py`); `load.py` makes a local or remote one,
`files.py` scores record files; `long_cases.py` holds long cases at 4k-16k tokens and
what rendering them costs.
"""
