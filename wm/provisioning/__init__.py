"""Provisioning: from queue demand to launched workers, one pass of one provider at a time.

provisioner.py is the pass (claims, intents, the cloud's creates); its decisions are pure
modules beside it: estimator.py (how much capacity to add), launch_choice.py (which launch
configs get it), intent_sightings.py (when an open intent may be judged lost) and pass_news.py
(demand that arrives while a pass's creates are in flight); creates_in_flight.py holds a pass's
creates while they are out (send, and one wait for news or for every answer).
"""
