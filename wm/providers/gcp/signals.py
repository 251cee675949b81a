"""GCE's signals for the launch choice, read with the Google clients through the provider's
gate at its lowest priority (background calls):

- price: the Cloud Billing Catalog's Compute Engine SKUs (`services/6F81-5844-456A/skus`,
  google-cloud-billing, paged, the whole catalogue: GCE publishes no per-type price), a
  machine type's price being its vCPUs times its family's core-hour SKU plus its memory times
  the GiB-hour SKU of its region (machine_shapes.py; custom types get none), spot from the
  "Preemptible" SKUs. The Billing API has its own quota; its pages still draw Compute reads.
- availability and pre-emption: `regions.advice.capacity` (google-cloud-compute's
  AdviceClient) per region, machine type and market for the zones wanted: `obtainability`
  (0..1) per zone, and `estimatedUptime` read as a pre-emption rate of 1 / uptime per
  instance-hour. Only for offerings of pools with demand; it draws from Compute's reads.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from wm.calls import CallClass
from wm.errors import SPOT
from wm.kinds.gcp import GcpProviderConfig
from wm.model import Offering, OfferingSignal, SignalKind
from wm.providers.gate import Gate
from wm.providers.gcp.machine_shapes import parse_sku_description, shape
from wm.providers.signal_sources import DAY_S, Cadence, SignalSource, SourceGarbage

PRICES = SignalSource("skus.list", (SignalKind.PRICE,), Cadence.PRICE, DAY_S)
ADVICE = SignalSource(
    "advice.capacity",
    (SignalKind.AVAILABILITY, SignalKind.PREEMPTION),
    Cadence.CAPACITY,
    900.0,
    demand_only=True,
)
SOURCES = (PRICES, ADVICE)
# The Billing API has its own quota; its pages still draw Compute reads, so that every call wm
# makes is paced by one bucket or another (a daily read of a few pages costs nothing that matters).
CALL_CLASSES = {"skus.list": (CallClass.READ,), "advice.capacity": (CallClass.READ,)}
COMPUTE_SERVICE = "services/6F81-5844-456A"
BILLING_ENDPOINT = "cloudbilling.googleapis.com"
SKU_PAGE_SIZE = 5000
SKU_PAGES_MAX = 50
SECONDS_PER_HOUR = 3600.0


class GcpSignals:
    """The signal reads of one GCP provider (wm.providers.signal_sources.SignalCollector)."""

    sources = SOURCES

    def __init__(self, config: GcpProviderConfig, gate: Gate) -> None:
        self.provider_id = config.id
        self._config = config
        self.gate = gate
        self._catalog: Any = None
        self._advice: Any = None
        self._lock = threading.Lock()

    def collect(self, source: str, offerings: Sequence[Offering]) -> list[OfferingSignal]:
        if source == PRICES.name:
            return self._prices(offerings)
        if source == ADVICE.name:
            return self._capacity(offerings)
        raise KeyError(f"GCE has no signal source {source!r}")

    # -- prices -----------------------------------------------------------------------------

    def _prices(self, offerings: Sequence[Offering]) -> list[OfferingSignal]:
        from google.cloud import billing_v1

        client = self._clients()[0]
        rates: dict[tuple[str, str, str, bool], float] = {}  # (region, family, resource, spot)
        token = ""
        for _ in range(SKU_PAGES_MAX):
            request = billing_v1.ListSkusRequest(
                parent=COMPUTE_SERVICE, page_size=SKU_PAGE_SIZE, page_token=token
            )
            page = self.gate.call(
                "skus.list",
                lambda r: next(iter(client.list_skus(request=r).pages)),
                request,
                background=True,
            )
            for sku in page.skus:
                parsed = parse_sku_description(sku.description)
                if parsed is None or not sku.pricing_info:
                    continue
                family, resource, spot = parsed
                tiers = sku.pricing_info[0].pricing_expression.tiered_rates
                if not tiers:
                    raise SourceGarbage(f"SKU {sku.sku_id} has no rate")
                money = tiers[0].unit_price
                price = int(money.units) + money.nanos / 1e9
                for region in sku.service_regions:
                    rates[(region, family, resource, spot)] = price
            token = page.next_page_token
            if not token:
                break
        now = datetime.now(UTC)
        found = []
        for offering in offerings:
            form = shape(offering.instance_type)
            if form is None:
                continue
            spot = offering.market == SPOT
            core = rates.get((offering.region, form.family, "Core", spot))
            ram = rates.get((offering.region, form.family, "Ram", spot))
            if core is None or ram is None:
                continue
            value = core * form.vcpus + ram * form.memory_gib
            found.append(PRICES.signal(self.provider_id, offering, value, now, SignalKind.PRICE))
        return found

    # -- capacity advice --------------------------------------------------------------------

    def _capacity(self, offerings: Sequence[Offering]) -> list[OfferingSignal]:
        from google.cloud import compute_v1

        client = self._clients()[1]
        groups: dict[tuple[str, str, str], list[Offering]] = defaultdict(list)
        for offering in offerings:
            groups[(offering.region, offering.instance_type, offering.market)].append(offering)
        now = datetime.now(UTC)
        found = []
        for (region, machine_type, market), wanted in sorted(groups.items()):
            zones = sorted({o.zone for o in wanted if o.zone})
            request = compute_v1.CapacityAdviceRequest(
                size=1,
                instance_properties={
                    "scheduling": {"provisioning_model": "SPOT" if market == SPOT else "STANDARD"}
                },
                instance_flexibility_policy={
                    "instance_selections": {"wm": {"machine_types": [machine_type]}}
                },
                distribution_policy={"zones": [{"zone": f"zones/{z}"} for z in zones]},
            )
            answer = self.gate.call(
                "advice.capacity",
                client.capacity,
                project=self._config.project,
                region=region,
                capacity_advice_request_resource=request,
                background=True,
            )
            by_zone: dict[str, tuple[float, float | None]] = {}
            for recommendation in answer.recommendations:
                scores = recommendation.scores
                uptime_s = _seconds(scores.estimated_uptime)
                for shard in recommendation.shards:
                    zone = shard.zone.rsplit("/", 1)[-1]
                    by_zone[zone] = (min(1.0, max(0.0, scores.obtainability)), uptime_s)
            for offering in wanted:
                if offering.zone is None:
                    hit = max(by_zone.values(), default=None)
                else:
                    hit = by_zone.get(offering.zone)
                if hit is None:
                    continue
                obtainability, uptime_s = hit
                found.append(
                    ADVICE.signal(
                        self.provider_id, offering, obtainability, now, SignalKind.AVAILABILITY
                    )
                )
                if uptime_s:
                    rate = SECONDS_PER_HOUR / uptime_s
                    found.append(
                        ADVICE.signal(self.provider_id, offering, rate, now, SignalKind.PREEMPTION)
                    )
        return found

    # -- clients ----------------------------------------------------------------------------

    def _clients(self) -> tuple[Any, Any]:
        with self._lock:
            if self._catalog is None:
                from google.api_core.client_options import ClientOptions
                from google.auth.credentials import AnonymousCredentials
                from google.cloud import billing_v1, compute_v1

                config = self._config
                credentials = AnonymousCredentials() if config.credentials == "simulated" else None
                # The simulated GCE serves the Billing Catalog too; GCP's own is its own host.
                billing = ClientOptions(api_endpoint=config.endpoint or BILLING_ENDPOINT)
                compute = ClientOptions(api_endpoint=config.endpoint) if config.endpoint else None
                self._catalog = billing_v1.CloudCatalogClient(
                    credentials=credentials, client_options=billing, transport="rest"
                )
                self._advice = compute_v1.AdviceClient(
                    credentials=credentials, client_options=compute, transport="rest"
                )
            return self._catalog, self._advice

    def close(self) -> None:
        """The clients' sessions close with the process."""


def _seconds(duration: Any) -> float | None:
    """A protobuf Duration string ("3600s") or object as seconds; None when absent."""
    if not duration:
        return None
    text = str(duration)
    try:
        return float(text.removesuffix("s"))
    except ValueError as error:
        raise SourceGarbage(f"estimatedUptime {text!r}") from error


def make_signals(config: GcpProviderConfig, provider: Any) -> GcpSignals:
    """The provider's signal reads, through its gate (wm/providers/__init__.py calls this)."""
    return GcpSignals(config, provider.gate)
