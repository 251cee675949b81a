"""The `wm` command: main.py is the group, each command group lives in its own module, and
none holds logic. This package imports nothing, so that a command's module kept in its own
room (`wm import`: wm/take_over/cli.py) can use wm.cli.context without the group loading it
back half-made."""
