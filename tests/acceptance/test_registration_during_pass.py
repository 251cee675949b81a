"""A worker registers while the pass that launched it still waits on the rest of its creates.

`wm run provisioner` and `wm run web` as OS processes on one Postgres, the real GCE SDK against
the simulated GCE, the worker's genuine identity token from its VM's metadata service, sent by
the real taskcluster client. A VM boots whether or not wm's slowest call has answered; a pass
that recorded its creates only once all had answered left a booted worker's row without its
instance id, and its proof was refused.
"""

from __future__ import annotations

from tests.support.api_stack import POOLS, module_api
from wm.db import tasks
from wm.db.workers import list_workers

POOL = POOLS["gcp"]


def test_a_worker_whose_insert_answered_registers_while_its_pass_waits_on_the_rest(
    pg_server, template_db, sim_arm_server, tmp_path
):
    with module_api(pg_server.url, template_db, sim_arm_server, tmp_path) as api:
        # The account's write budget lets one insert through; the pass's other inserts wait.
        gcp = next(p for p in api.stack.data["providers"] if p["kind"] == "gcp")
        gcp["gate"] = {**gcp["gate"], "calls_per_s": 0.001, "burst": 1}
        api.stack.save()
        tasks.submit_tasks(api.engine, POOL, 3, 5.0)
        provisioner = api.stack.start("provisioner")

        def rows():
            return list_workers(api.engine, pool_id=POOL)

        provisioner.wait_for(lambda: any(w.cloud_id for w in rows()), 60, "the first VM's row")
        (launched,) = [w for w in rows() if w.cloud_id]

        reply = api.client().registerWorker(api.register_body(launched, api.proof(launched)))

        assert reply["expires"]  # registered: credentials and an expiry came back
        during = rows()
        assert len(during) == 3
        assert [w.cloud_id for w in during if w.worker_id != launched.worker_id] == [None, None]
        assert [w.state.value for w in during if w.worker_id == launched.worker_id] == ["running"]
        _, took = provisioner.terminate()
        assert took < 15  # its inserts waiting on the budget do not hold it up
