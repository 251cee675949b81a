"""Trust material shipped with wm (public certificates only)."""
