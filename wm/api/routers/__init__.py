"""The worker-manager API's routes, one router per resource (health, workers, pools, errors,
providers); wm/api/app.py includes them under the API's prefix."""
