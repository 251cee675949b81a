"""A simulated market for the simulated clouds (issue 40): offerings whose prices drift, whose
spare capacity runs short and whose spot instances are reclaimed, read from scenario files,
billed by a ledger. Pure and seeded; off unless a scenario is named."""

from wmsim.market.ledger import Ledger
from wmsim.market.model import Market
from wmsim.market.scenario import Scenario, ScenarioError, SimOffering

__all__ = ["Ledger", "Market", "Scenario", "ScenarioError", "SimOffering"]
