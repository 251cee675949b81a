"""ARM templates shipped with the simulator: the worker VM template the demo publishes as a
template spec, and the tests deploy (README.md says what it follows)."""

from pathlib import Path

WORKER_TEMPLATE = Path(__file__).with_name("worker-vm.json")
