"""The class of the cloud's refusal that ended a worker's launch (capacity, quota, ...), however
the cloud told it: refusing the create at once, or failing it later in an operation, a
provisioning state or a deployment that a scan reads. The launch choice counts capacity
refusals from it; the stop reason alone holds the late ones only in each cloud's own words.

Revision ID: 0012
Revises: 0011
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("workers", sa.Column("launch_refused", sa.Text, nullable=True))
    # Refusals of the create itself were kept as "launch failed: <class> <code>".
    op.execute(
        "UPDATE workers SET launch_refused ="
        " split_part(substr(stop_reason, length('launch failed: ') + 1), ' ', 1)"
        " WHERE stop_reason LIKE 'launch failed: %'"
    )


def downgrade() -> None:
    op.drop_column("workers", "launch_refused")
