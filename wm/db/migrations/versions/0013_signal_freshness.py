"""Until when each stored signal may be used: a source that stays down (or an offering no longer
asked about) must not leave its last value in the launch choice for ever. Written by the
signals job from the source's cadence.

Revision ID: 0013
Revises: 0012
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "offering_signals", sa.Column("fresh_until", sa.DateTime(timezone=True), nullable=True)
    )
    # The values held before: good until a day after they were read (the longest cadence of
    # any source; the next read rewrites them with their own).
    op.execute("UPDATE offering_signals SET fresh_until = observed_at + interval '1 day'")
    op.alter_column("offering_signals", "fresh_until", nullable=False)


def downgrade() -> None:
    op.drop_column("offering_signals", "fresh_until")
