"""`python -m orchrm` runs the command-line tool."""

from orchrm.cli import app

app(prog_name="orchrm")
