"""Shared fixtures: the Postgres server and the simulated clouds."""

pytest_plugins = [
    "tests.fixtures.postgres",
    "tests.fixtures.sim_ec2",
    "tests.fixtures.sim_gce",
    "tests.fixtures.sim_arm",
    "tests.fixtures.identity",
]
