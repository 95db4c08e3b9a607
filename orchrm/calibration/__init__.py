"""A reward model's score -> P(correct): Platt and isotonic maps, the
reliability diagram and ECE (`methods.py`), and `orchrm calibrate` (`calibrate.py`).
"""
