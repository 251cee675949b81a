"""A worker's life and its registration, as pure decisions.

transitions.py is every change a worker row goes through (one table; wm/db/worker_writes.py
makes them); lifecycle.py the deadlines and scale-down advice; stages.py the stages of a
worker's life and how long each took; registration_policy.py registerWorker's refusals and the
identity a proof must show; identity.py what a registering worker proves (the verifiers live
in each cloud's provider package); static_workers.py createWorker and updateWorker of workers
no cloud launches.
"""
