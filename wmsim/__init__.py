"""wm's simulator: simulated EC2, GCE and ARM, a simulated worker, and the demo."""
