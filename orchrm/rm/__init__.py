"""The Bradley-Terry reward model: its config, pair data, backbone and scoring, training
loop and checkpoints."""
