"""What every `wmsim` command shares: the config file, read lazily."""

from __future__ import annotations

from wmsim import config as sim_config
from wmsim.config import SimSettings


class SimContext:
    def __init__(self, config_path: str | None) -> None:
        self.config_path = config_path
        self._settings: SimSettings | None = None

    def settings(self) -> SimSettings:
        if self._settings is None:
            self._settings = sim_config.load(self.config_path)
        return self._settings
