"""When each worker passed each stage of its life, for latency by stage and pre-emptions;
when a task went back to pending because its worker was lost.

demand_at (the oldest pending task it was launched for), accepted_at (the cloud took the
create), cloud_running_at (a scan first saw the cloud run it), first_claimed_at, and for its
removal stopping_at (the decision), delete_called_at and stopped_at (gone); preempted_at when
the cloud took it back. A trigger stamps stopping_at and stopped_at on every way a row enters
those states, so no code path can forget them.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

STAGE_COLUMNS = (
    "demand_at",
    "accepted_at",
    "cloud_running_at",
    "first_claimed_at",
    "stopping_at",
    "delete_called_at",
    "stopped_at",
    "preempted_at",
)

STAMP_STATE_ENTRY = """
CREATE FUNCTION wm_stamp_state_entry() RETURNS trigger AS $$
BEGIN
    IF NEW.state IS DISTINCT FROM OLD.state THEN
        IF NEW.state = 'stopping' THEN
            NEW.stopping_at := coalesce(NEW.stopping_at, now());
        ELSIF NEW.state = 'stopped' THEN
            NEW.stopping_at := coalesce(NEW.stopping_at, now());
            NEW.stopped_at := coalesce(NEW.stopped_at, now());
        END IF;
    END IF;
    RETURN NEW;
END
$$ LANGUAGE plpgsql
"""


def upgrade() -> None:
    op.add_column("tasks", sa.Column("requeued_at", sa.DateTime(timezone=True), nullable=True))
    for name in STAGE_COLUMNS:
        op.add_column("workers", sa.Column(name, sa.DateTime(timezone=True), nullable=True))
    op.create_index(
        "ix_workers_preempted",
        "workers",
        ["pool_id", "launch_config_id", "preempted_at"],
        postgresql_where=sa.text("preempted_at IS NOT NULL"),
    )
    op.execute(STAMP_STATE_ENTRY)
    op.execute(
        "CREATE TRIGGER workers_stamp_state_entry BEFORE UPDATE OF state ON workers "
        "FOR EACH ROW EXECUTE FUNCTION wm_stamp_state_entry()"
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER workers_stamp_state_entry ON workers")
    op.execute("DROP FUNCTION wm_stamp_state_entry()")
    op.drop_index("ix_workers_preempted", table_name="workers")
    for name in reversed(STAGE_COLUMNS):
        op.drop_column("workers", name)
    op.drop_column("tasks", "requeued_at")
